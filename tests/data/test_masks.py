"""document_masks: the EoD rules of docs/recipe.md section 2."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.data.masks import document_masks

BOD, EOD, PAD = 1, 2, 3


def test_spec_example_two_documents():
    a, b, c, d = 11, 12, 13, 14
    tokens = np.array([BOD, a, b, EOD, BOD, c, d, EOD])
    segment_ids, positions, loss_mask = document_masks(tokens, EOD)
    assert segment_ids.tolist() == [1, 1, 1, 1, 2, 2, 2, 2]
    assert positions.tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert loss_mask.tolist() == [1, 1, 1, 0, 1, 1, 1, 0]
    assert segment_ids.dtype == positions.dtype == loss_mask.dtype == np.int32


def test_row_starting_mid_document_and_batched():
    tokens = np.array([[20, 21, EOD, BOD, 22], [BOD, 23, 24, 25, 26]])
    segment_ids, positions, loss_mask = document_masks(tokens, EOD)
    assert segment_ids.tolist() == [[1, 1, 1, 2, 2], [1, 1, 1, 1, 1]]
    assert positions.tolist() == [[0, 1, 2, 0, 1], [0, 1, 2, 3, 4]]
    assert loss_mask.tolist() == [[1, 1, 0, 1, 1], [1, 1, 1, 1, 1]]


def test_padding_attends_nowhere_and_is_never_a_target():
    tokens = np.array([BOD, 30, EOD, PAD, PAD])
    targets = np.array([30, EOD, PAD, PAD, PAD])
    segment_ids, positions, loss_mask = document_masks(tokens, EOD, pad_id=PAD, targets=targets)
    assert segment_ids.tolist() == [1, 1, 1, 0, 0]
    assert positions.tolist() == [0, 1, 2, 0, 0]
    assert loss_mask.tolist() == [1, 1, 0, 0, 0]
    # A pad target after a non-EoD input is masked when targets are given.
    _, _, loss_mask = document_masks(np.array([BOD, 30]), EOD, PAD, targets=np.array([30, PAD]))
    assert loss_mask.tolist() == [1, 0]


def test_pad_equal_to_eod_keeps_eod_targets():
    """Tokenizers without a pad token pad with EoD: real EoDs must stay targets and keep their segment."""
    tokens = np.array([BOD, 30, EOD, BOD, 31, EOD, EOD])
    targets = np.array([30, EOD, BOD, 31, EOD, EOD, EOD])
    segment_ids, positions, loss_mask = document_masks(tokens, EOD, pad_id=EOD, targets=targets)
    assert segment_ids.tolist() == [1, 1, 1, 2, 2, 2, 3]
    assert positions.tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert loss_mask.tolist() == [1, 1, 0, 1, 1, 0, 0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(4, 9), max_size=6), min_size=1, max_size=6), st.integers(0, 5))
def test_segments_positions_follow_documents(documents, start):
    """For any packed documents cut at any start: positions count from each document start (or the row
    start), each EoD ends its segment, and only EoD inputs are out of the loss."""
    stream = np.concatenate([[BOD, *doc, EOD] for doc in documents])[start:]
    if stream.size == 0:
        return
    segment_ids, positions, loss_mask = document_masks(stream, EOD)
    expected_segment, expected_position = 1, 0
    for i, token in enumerate(stream):
        assert segment_ids[i] == expected_segment and positions[i] == expected_position
        assert loss_mask[i] == (token != EOD)
        expected_position += 1
        if token == EOD:
            expected_segment, expected_position = expected_segment + 1, 0
