"""PackedRows: stride-T rows of T + 1 tokens, split long documents, exact state, padded end."""

import grain
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.data.packing import PackedRows

PAD = 3


def make_stream(lengths):
    """Consecutive documents of one component holding the consecutive ids 10, 11, ..."""
    starts = np.cumsum([10] + list(lengths))
    documents = [np.arange(start, start + length, dtype=np.int32) for start, length in zip(starts, lengths)]
    return grain.MapDataset.source([(0, i) for i in range(len(lengths))]), [documents]


def test_rows_overlap_by_one_token_and_split_long_documents():
    stream, documents = make_stream([5, 23, 2, 7])  # 37 tokens: 10 .. 46
    rows = list(PackedRows(stream, documents, seq_len=8, pad_id=PAD))
    stream = np.arange(10, 47)
    # Row r holds stream[r*8 : r*8 + 9]; every token after the first is a target exactly once.
    for r, row in enumerate(rows[:-1]):
        np.testing.assert_array_equal(row, stream[r * 8 : r * 8 + 9])
    targets = np.concatenate([row[1:] for row in rows])
    np.testing.assert_array_equal(targets[targets != PAD], stream[1:])
    # The last partial row is padded, then iteration stops.
    assert rows[-1][-1] == PAD and len(rows) == 5


def test_state_restores_mid_document():
    stream, documents = make_stream([50, 3, 41, 17, 9, 60])
    reference = list(PackedRows(stream, documents, 16, PAD))
    for cut in range(len(reference)):
        packer = PackedRows(stream, documents, 16, PAD)
        for _ in range(cut):
            next(packer)
        state = packer.get_state()
        resumed = PackedRows(stream, documents, 16, PAD)
        resumed.set_state(state)
        rest = list(resumed)
        assert len(rest) == len(reference) - cut
        for a, b in zip(rest, reference[cut:]):
            np.testing.assert_array_equal(a, b)


def test_documents_started_per_component():
    stream = grain.MapDataset.source([(0, 0), (1, 0), (0, 1)])
    documents = [
        [np.arange(10, dtype=np.int32), np.arange(30, dtype=np.int32)],
        [np.arange(4, dtype=np.int32)],
    ]
    packer = PackedRows(stream, documents, 8, PAD)
    next(packer)  # tokens 0..8 of document 0
    assert packer.documents_started == [1, 0]
    next(packer)  # 8..16: rest of document 0, document 1, start of document 2
    assert packer.documents_started == [2, 1]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=12), st.integers(1, 17))
def test_every_token_is_a_target_exactly_once(lengths, seq_len):
    """For any document lengths and row length: rows are stride-seq_len windows of the stream, and the
    targets (minus the final padding) are the stream without its first token."""
    stream, documents = make_stream(lengths)
    tokens = np.concatenate(documents[0])
    rows = list(PackedRows(stream, documents, seq_len, PAD))
    assert all(len(row) == seq_len + 1 for row in rows)
    targets = np.concatenate([row[1:] for row in rows]) if rows else np.zeros(0, np.int32)
    np.testing.assert_array_equal(targets[: max(len(tokens) - 1, 0)], tokens[1:])
    assert (targets[len(tokens) - 1 :] == PAD).all()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(1, 40)), min_size=1, max_size=12),
    st.integers(1, 16),
)
def test_tokens_consumed_count_every_target_once(docs, seq_len):
    """Per component, tokens_consumed is the number of targets (row positions 1..T, not padding) whose
    token came from that component; the documents hold distinct ids, so each target's component is known."""
    next_id, documents, owner, order = 10, [[], []], {}, []
    for component, length in docs:
        ids = np.arange(next_id, next_id + length, dtype=np.int32)
        owner.update(dict.fromkeys(ids.tolist(), component))
        order.append((component, len(documents[component])))
        documents[component].append(ids)
        next_id += length
    packer = PackedRows(grain.MapDataset.source(order), documents, seq_len, PAD)
    targets = [t for row in packer for t in row[1:].tolist() if t != PAD]
    assert packer.tokens_consumed == [sum(owner[t] == c for t in targets) for c in (0, 1)]
    assert sum(packer.tokens_consumed) == sum(length for _, length in docs) - 1
