"""Whole sequences packed into a row: segments, positions, padding, loss mask on trained targets."""

import numpy as np
import pytest

from apertus_jax.posttrain.rows import pack_row


def test_two_sequences_and_padding():
    a = (np.array([1, 10, 11, 2], np.int32), np.array([0, 0, 1, 1], bool))
    b = (np.array([1, 20, 2], np.int32), np.array([0, 1, 0], bool))
    row = pack_row([a, b], seq_len=7, pad_id=3)
    assert row["tokens"].tolist() == [1, 10, 11, 1, 20, 3, 3]
    assert row["targets"].tolist() == [10, 11, 2, 20, 2, 3, 3]
    assert row["segment_ids"].tolist() == [1, 1, 1, 2, 2, 0, 0]
    assert row["positions"].tolist() == [0, 1, 2, 0, 1, 0, 0]
    assert row["loss_mask"].tolist() == [0, 1, 1, 1, 0, 0, 0]


def test_overfull_row_is_refused():
    a = (np.arange(6, dtype=np.int32), np.ones(6, bool))
    with pytest.raises(ValueError, match="do not fit a row of 4"):
        pack_row([a], seq_len=4, pad_id=3)
