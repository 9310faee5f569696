"""posttrain.epochs: the epoch cursor, its state, rows per step and the inputs fingerprint."""

import numpy as np
import pytest

from apertus_jax.optim.batch_plan import BatchSizePlan
from apertus_jax.posttrain import epochs


class _Letters(epochs.EpochIterator):
    STATE_MISMATCH = "letters state mismatch"

    def __init__(self, seed, fingerprint="f"):
        super().__init__(seed)
        self.fingerprint = fingerprint

    def __next__(self):
        item = "abcde"[self.order(5)[self.position]]
        self.advance(5)
        self.step += 1
        return item


def test_each_epoch_is_a_seeded_permutation_and_the_cursor_resumes():
    it = _Letters(seed=3)
    first, second = [next(it) for _ in range(5)], [next(it) for _ in range(5)]
    assert sorted(first) == sorted(second) == list("abcde")
    assert (it.epoch, it.position, it.step) == (2, 0, 10)
    expected = ["abcde"[i] for i in np.random.default_rng([3, 0]).permutation(5)]
    assert first == expected
    it = _Letters(seed=3)
    [next(it) for _ in range(7)]
    fresh = _Letters(seed=3)
    fresh.set_state(it.get_state())
    assert [next(fresh) for _ in range(6)] == [next(it) for _ in range(6)]


def test_a_state_of_other_inputs_is_refused():
    state = _Letters(seed=0, fingerprint="one").get_state()
    with pytest.raises(ValueError, match="letters state mismatch"):
        _Letters(seed=0, fingerprint="two").set_state(state)
    with pytest.raises(ValueError, match="letters state mismatch"):
        _Letters(seed=0, fingerprint="one").set_state({**state, "version": 0})


def test_rows_per_step_reads_a_batch_size_plan():
    assert epochs.rows_per_step(8, 64, 100) == 8
    plan = BatchSizePlan(((0, 4 * 64), (10 * 4 * 64, 8 * 64)))  # 8 rows from step 10
    assert [epochs.rows_per_step(plan, 64, s) for s in (0, 9, 10)] == [4, 4, 8]


def test_the_fingerprint_changes_with_contents_and_settings(tmp_path, tokenizer):
    path = tmp_path / "a.jsonl"
    path.write_text('{"x": 1}\n')
    one = epochs.inputs_fingerprint([str(path)], tokenizer, 128)
    assert one == epochs.inputs_fingerprint([str(path)], tokenizer, 128)
    assert one != epochs.inputs_fingerprint([str(path)], tokenizer, 256)
    path.write_text('{"x": 2}\n')
    assert one != epochs.inputs_fingerprint([str(path)], tokenizer, 128)
