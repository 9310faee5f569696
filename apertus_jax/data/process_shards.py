"""This process's rows of a run: the data split into shards, each process reading a consecutive block of them.

    source = sharded(build, data, jax.process_index(), jax.process_count())   # build(shard, num_shards)
    next(source)   # the shards' batches concatenated in shard order; get_state / set_state / consumed

A shard is any batch source (`apertus_jax.train.batches.BatchSource`: the data pipeline's `TrainIterator`,
post-training's chat and preference rows). With `data.num_shards` = S fixed, process p of P reads the shards
[p * S / P, (p + 1) * S / P), so the global batch is the same whatever the number of hosts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from apertus_jax.data.config import DataConfig

# (shard index, shard count) -> that shard's batch source: what a job hands `sharded`.
ShardBuilder = Callable[[int, int], Any]


def add_counts(a: Any, b: Any) -> Any:
    """The sum of two `consumed()` records: numbers add, lists add elementwise, dicts add key by key."""
    if isinstance(a, dict):
        return {key: add_counts(a[key], b[key]) if key in a else b[key] for key in {**b, **a}}
    if isinstance(a, list):
        return [add_counts(x, y) for x, y in zip(a, b, strict=True)]
    return a + b


class ShardedSource:
    """This process's rows: the batches of its consecutive data shards, concatenated in shard order."""

    def __init__(self, shards: list, batch_metrics: Callable[[dict], dict] | None = None):
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
