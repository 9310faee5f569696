"""PackedRows: stride-T rows of T + 1 tokens, split long documents, exact state, padded end."""

import grain
import numpy as np

from apertus_jax.data.packing import PackedRows

PAD = 3


def make_documents(lengths, component=0):
    start = 10
    documents = []
    for length in lengths:
        documents.append((component, np.arange(start, start + length, dtype=np.int32)))
        start += length
    return grain.MapDataset.source(documents)


def test_rows_overlap_by_one_token_and_split_long_documents():
    documents = make_documents([5, 23, 2, 7])  # 37 tokens: 10 .. 46
    rows = list(PackedRows(documents, seq_len=8, num_components=1, pad_id=PAD))
    stream = np.arange(10, 47)
    # Row r holds stream[r*8 : r*8 + 9]; every token after the first is a target exactly once.
    for r, row in enumerate(rows[:-1]):
        np.testing.assert_array_equal(row, stream[r * 8 : r * 8 + 9])
    targets = np.concatenate([row[1:] for row in rows])
    np.testing.assert_array_equal(targets[targets != PAD], stream[1:])
    # The last partial row is padded, then iteration stops.
    assert rows[-1][-1] == PAD and len(rows) == 5


def test_state_restores_mid_document():
    documents = make_documents([50, 3, 41, 17, 9, 60])
    reference = list(PackedRows(documents, 16, 1, PAD))
    for cut in range(len(reference)):
        packer = PackedRows(documents, 16, 1, PAD)
        for _ in range(cut):
            next(packer)
        state = packer.get_state()
        resumed = PackedRows(documents, 16, 1, PAD)
        resumed.set_state(state)
        rest = list(resumed)
        assert len(rest) == len(reference) - cut
        for a, b in zip(rest, reference[cut:]):
            np.testing.assert_array_equal(a, b)


def test_documents_started_per_component():
    documents = grain.MapDataset.source(
        [(0, np.arange(10, dtype=np.int32)), (1, np.arange(4, dtype=np.int32)), (0, np.arange(30, dtype=np.int32))])
    packer = PackedRows(documents, 8, 2, PAD)
    next(packer)  # tokens 0..8 of document 0
    assert packer.documents_started == [1, 0]
    next(packer)  # 8..16: rest of document 0, document 1, start of document 2
    assert packer.documents_started == [2, 1]
