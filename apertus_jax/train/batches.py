"""Where the loop's batches come from: the batch-source protocol, data shards over processes, the default source.

A batch source is the trainer's plug-in for data. It yields this process's rows of every step and can save
and restore its position exactly:

    next(source)         -> {"tokens", "targets", "positions", "segment_ids", "loss_mask": int32 [B_local, T],
                             plus the objective's `batch_arrays`}
    source.get_state()   -> a JSON-serializable dict; source.set_state(state) continues right after it
    source.consumed()    -> {"tokens": {component: target tokens}, ...}: JSON-serializable counts of what the
                            batches handed out so far hold (summed over shards; `{}` when nothing is counted)
    source.batch_metrics(batch) -> {name: float}: optional; scalars of one batch the loop records with its
                            step (the pipeline with Goldfish: `goldfish_dropped_fraction`)

The default source reads the run's `data.pipeline` (`apertus_jax.data.pipeline.TrainIterator`); post-training
passes its own (chat rows, preference rows). Both are split into `data.num_shards` shards (0: one per
process), process p reading the shards [p * S / P, (p + 1) * S / P): with S fixed, the global batch is the
same whatever the number of hosts.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

import grain
import jax
import numpy as np

from apertus_jax.data.config import DataConfig
from apertus_jax.data.goldfish import dropped_fraction
from apertus_jax.data.pipeline import TrainIterator
from apertus_jax.train.config import RunConfig


class BatchSource(Protocol):
    """The protocol of the loop's data (module docstring)."""

    def __next__(self) -> dict[str, np.ndarray]: ...

    def get_state(self) -> dict: ...

    def set_state(self, state: dict) -> None: ...

    def consumed(self) -> dict: ...


# (shard index, shard count) -> that shard's source: what a job hands `sharded` to build its batch source.
ShardBuilder = Callable[[int, int], BatchSource]


def add_counts(a: Any, b: Any) -> Any:
    """The sum of two `consumed()` records: numbers add, lists add elementwise, dicts add key by key."""
    if isinstance(a, dict):
        return {key: add_counts(a[key], b[key]) if key in a else b[key] for key in {**b, **a}}
    if isinstance(a, list):
        return [add_counts(x, y) for x, y in zip(a, b, strict=True)]
    return a + b


class ShardedSource:
    """This process's rows: the batches of its consecutive data shards, concatenated in shard order."""

    def __init__(self, shards: list[BatchSource], batch_metrics: Callable[[dict], dict] | None = None):
        self.shards = shards
        self._batch_metrics = batch_metrics

    def __iter__(self) -> ShardedSource:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        batches = [next(shard) for shard in self.shards]
        return {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}

    def batch_metrics(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        return self._batch_metrics(batch) if self._batch_metrics else {}

    def get_state(self) -> dict:
        return {"shards": [shard.get_state() for shard in self.shards]}

    def set_state(self, state: dict) -> None:
        if len(state["shards"]) != len(self.shards):
            raise ValueError(
                f"data iterator state holds {len(state['shards'])} shards, this process reads "
                f"{len(self.shards)}; resume with the same data.num_shards and process count"
            )
        for shard, shard_state in zip(self.shards, state["shards"]):
            shard.set_state(shard_state)

    def consumed(self) -> dict:
        total = self.shards[0].consumed()
        for shard in self.shards[1:]:
            total = add_counts(total, shard.consumed())
        return total


def sharded(
    build: ShardBuilder,
    data: DataConfig,
    process_index: int,
    process_count: int,
    batch_metrics: Callable[[dict], dict] | None = None,
) -> ShardedSource:
    """This process's shards of `build` (`data.num_shards`, 0: one per process), with `batch_metrics`.

    Raises:
      ValueError: `data.num_shards` is not a multiple of the process count.
    """
    num_shards = data.num_shards or process_count
    if num_shards % process_count:
        raise ValueError(f"data.num_shards={num_shards} must be a multiple of the {process_count} processes")
    per_process = num_shards // process_count
    first = process_index * per_process
    return ShardedSource(
        [build(shard, num_shards) for shard in range(first, first + per_process)], batch_metrics
    )


def pipeline_source(config: RunConfig, tokenizer) -> ShardedSource:
    """The default batch source of a run: its `data.pipeline` read by `TrainIterator` shards, batch sizes
    following `train.batch_plan`; with Goldfish (k > 0) each step records `goldfish_dropped_fraction`.

    Raises:
      ValueError / FileNotFoundError: bad data (a missing path, an empty source, a stage out of documents).
    """

    def build(shard: int, num_shards: int) -> TrainIterator:
        return TrainIterator(
            config.data.pipeline,
            tokenizer,
            seq_len=config.data.seq_len,
            batch_size=config.train.plan,
            process_index=shard,
            process_count=num_shards,
            seed=config.seed,
        )

    goldfish = lambda batch: {"goldfish_dropped_fraction": dropped_fraction(batch, tokenizer.eod_id)}
    k = config.data.pipeline.goldfish.k
    return sharded(build, config.data, jax.process_index(), jax.process_count(), goldfish if k else None)


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
      iterator: the batch source (e.g. `apertus_jax.train.batches.ShardedSource`).
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
        """Discards batches read ahead and continues from `state`."""
        self.close()
        self.iterator.set_state(state)
        self._state, self._consumed = self.iterator.get_state(), self.iterator.consumed()

    def close(self) -> None:
        """Stops the thread; batches read ahead are dropped and the wrapped iterator is set back to the state
        after the last consumed batch (a later `__next__` continues exactly there)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.iterator.set_state(self._state)
