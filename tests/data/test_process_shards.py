"""A process's data shards: their batches in row order, their state, and the sum of what they consumed."""

import grain
import numpy as np
import pytest

from apertus_jax.data import process_shards
from apertus_jax.data.demo_corpus import load_demo_documents


@pytest.fixture(name="shard_rows", scope="module")
def fixture_shard_rows():
    """Two shards of real text: 16 UTF-8 bytes from the start of UDHR translations, as int32 rows."""
    docs = load_demo_documents("train", ["udhr"])[:24]
    rows = [np.frombuffer(d["text"].encode("utf-8")[:16], np.uint8).astype(np.int32) for d in docs]
    return rows[:12], rows[12:]


def make_shards(shard_rows, rows_per_batch=2):
    return [
        iter(grain.MapDataset.source([{"tokens": r} for r in rows]).batch(rows_per_batch).to_iter_dataset())
        for rows in shard_rows
    ]


def test_batches_concatenate_the_shards_in_order(shard_rows):
    iterator = process_shards.ShardedSource(make_shards(shard_rows))
    first, second = next(iterator), next(iterator)
    np.testing.assert_array_equal(first["tokens"], np.stack([*shard_rows[0][:2], *shard_rows[1][:2]]))
    np.testing.assert_array_equal(second["tokens"], np.stack([*shard_rows[0][2:4], *shard_rows[1][2:4]]))
    assert first["tokens"].shape == (4, 16) and first["tokens"].dtype == np.int32


def test_state_round_trip_resumes_at_the_same_rows(shard_rows):
    iterator = process_shards.ShardedSource(make_shards(shard_rows))
    next(iterator)
    state = iterator.get_state()
    assert len(state["shards"]) == 2
    expected = [next(iterator)["tokens"] for _ in range(2)]
    resumed = process_shards.ShardedSource(make_shards(shard_rows))
    resumed.set_state(state)
    for tokens in expected:
        np.testing.assert_array_equal(next(resumed)["tokens"], tokens)


def test_state_of_another_shard_count_is_refused(shard_rows):
    state = process_shards.ShardedSource(make_shards(shard_rows)).get_state()
    single = process_shards.ShardedSource(make_shards(shard_rows[:1]))
    with pytest.raises(ValueError, match="holds 2 shards, this process reads 1"):
        single.set_state(state)


class _Counting:
    """A shard that counts its batches as consumed tokens and exposures."""

    def __init__(self, offset):
        self.offset, self.step = offset, 0

    def __next__(self):
        self.step += 1
        return {"tokens": np.full((1, 4), self.offset + self.step, np.int32)}

    def consumed(self):
        return {"tokens": {"a": self.step * 4}, "exposures": {"p": [self.step, self.offset]}}


def test_sharded_takes_this_processes_shards_and_sums_what_they_consumed():
    from apertus_jax.data.config import DataConfig

    built = []

    def build(shard, count):
        built.append((shard, count))
        return _Counting(shard)

    source = process_shards.sharded(build, DataConfig(num_shards=4), process_index=1, process_count=2)
    assert built == [(2, 4), (3, 4)]
    np.testing.assert_array_equal(next(source)["tokens"][:, 0], [3, 4])
    assert source.consumed() == {"tokens": {"a": 8}, "exposures": {"p": [2, 5]}}
    with pytest.raises(ValueError, match="multiple of the 3 processes"):
        process_shards.sharded(build, DataConfig(num_shards=4), process_index=0, process_count=3)


def test_add_counts_adds_numbers_lists_and_keys():
    assert process_shards.add_counts({"a": 1, "l": [1, 2]}, {"a": 2, "b": 3, "l": [3, 4]}) == {
        "a": 3,
        "b": 3,
        "l": [4, 6],
    }
