"""Where the loop's batches come from: the batch-source protocol, and batches prefetched ahead of the step.

A batch source is the trainer's plug-in for data. It yields this process's rows of every step and can save
and restore its position exactly:

    next(source)         -> {"tokens", "targets", "positions", "segment_ids", "loss_mask": int32 [B_local, T],
                             plus the objective's `batch_arrays`}
    source.get_state()   -> a JSON-serializable dict; source.set_state(state) continues right after it
    source.consumed()    -> {"tokens": {component: target tokens}, ...}: JSON-serializable counts of what the
                            batches handed out so far hold (summed over shards; `{}` when nothing is counted)
    source.batch_metrics(batch) -> {name: float}: optional; scalars of one batch the loop records with its
                            step (the pipeline with Goldfish: `goldfish_dropped_fraction`)

The default source reads the run's `data.pipeline` (`apertus_jax.data.pipeline.pipeline_source`); post-training
passes its own (chat rows, preference rows). Both are split into `data.num_shards` shards over the processes
(`apertus_jax.data.process_shards`): the global batch is the same whatever the number of hosts.
"""

from __future__ import annotations

import queue
import threading
from typing import Protocol

import grain
import numpy as np


class DataStateMismatchError(ValueError):
    """A checkpoint's data position does not fit the batch source (another data config, batch source kind,
    seed or process layout): its `set_state` rejected it. The checkpoint is intact; resuming must stop."""


class BatchSource(Protocol):
    """The protocol of the loop's data (module docstring)."""

    def __next__(self) -> dict[str, np.ndarray]: ...

    def get_state(self) -> dict: ...

    def set_state(self, state: dict) -> None: ...

    def consumed(self) -> dict: ...


# Batches produced ahead of the train step by a background thread, with exact iterator-state checkpoints.
#
# The data pipeline (reading, packing, masks, Goldfish hashing) is numpy work on the host; run inline it leaves
# the accelerator idle between steps. `Prefetcher` runs it `depth` batches ahead in a daemon thread and
# records, with every batch, the wrapped iterator's state right after producing it. `get_state()` returns the
# state recorded with the last batch handed out by `__next__` (the last CONSUMED batch), never that of a batch
# still waiting in the queue, so a checkpoint resumes at exactly the next unconsumed batch whatever the
# thread had read ahead. `set_state` stops the thread, restores the wrapped iterator and starts reading afresh.
class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


class Prefetcher(grain.DatasetIterator):
    """Wraps a batch source (`apertus_jax.train.batches.BatchSource`) as a Grain-checkpointable iterator.

    Args:
      iterator: the batch source (e.g. `apertus_jax.data.process_shards.ShardedSource`).
      depth: batches produced ahead (>= 1); 0 returns batches inline, with no thread.

    An exception raised by the wrapped iterator (StopIteration included) is re-raised by `__next__` at the
    position where it occurred.
    """

    def __init__(self, iterator, depth: int):
        super().__init__()
        if depth < 0:
            raise ValueError(f"prefetch depth={depth} must be >= 0")
        self.iterator = iterator
        self.depth = depth
        self._queue: queue.Queue | None = None
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._state, self._consumed = iterator.get_state(), iterator.consumed()

    def _start(self) -> None:
        self._queue, self._stop = queue.Queue(maxsize=self.depth), threading.Event()
        self._thread = threading.Thread(
            target=self._produce, args=(self._queue, self._stop), name="prefetch", daemon=True
        )
        self._thread.start()

    def _produce(self, out: queue.Queue, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                item = (next(self.iterator), self.iterator.get_state(), self.iterator.consumed())
            except BaseException as error:  # handed to the consumer, re-raised there
                item = _Failure(error)
            while not stop.is_set():
                try:
                    out.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if isinstance(item, _Failure):
                return

    def __next__(self) -> dict:
        if self.depth == 0:
            batch = next(self.iterator)
            self._state, self._consumed = self.iterator.get_state(), self.iterator.consumed()
            return batch
        if self._thread is None:
            self._start()
        item = self._queue.get()
        if isinstance(item, _Failure):
            self._thread = None
            raise item.error
        batch, self._state, self._consumed = item
        return batch

    def batch_metrics(self, batch: dict) -> dict[str, float]:
        """The wrapped source's `batch_metrics(batch)`, or {} when it has none."""
        metrics = getattr(self.iterator, "batch_metrics", None)
        return metrics(batch) if metrics else {}

    def get_state(self) -> dict:
        """The wrapped iterator's state after the last batch returned by `__next__`."""
        return self._state

    def consumed(self) -> dict:
        """The wrapped source's `consumed()` after the last batch returned by `__next__`; batches read ahead do
        not count."""
        return self._consumed

    def set_state(self, state: dict) -> None:
        """Discards batches read ahead and continues from `state`.

        Raises:
          DataStateMismatchError: the wrapped source rejected `state` (its error is the cause).
        """
        self.close()
        try:
            self.iterator.set_state(state)
        except Exception as e:  # noqa: BLE001 - whatever a source raises for a state not its own
            raise DataStateMismatchError(f"{type(e).__name__}: {e}") from e
        self._state, self._consumed = self.iterator.get_state(), self.iterator.consumed()

    def close(self) -> None:
        """Stops the thread; batches read ahead are dropped and the wrapped iterator is set back to the state
        after the last consumed batch (a later `__next__` continues exactly there)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.iterator.set_state(self._state)
