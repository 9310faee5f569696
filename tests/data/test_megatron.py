"""Megatron .bin/.idx: round trips against a transcription of Megatron's reader and builder
(`megatron_reference.py`), every dtype code, and one-line errors for broken files (nothing written)."""

import os
import struct

import numpy as np
import pytest

from apertus_jax.data import megatron
from apertus_jax.data.demo_corpus import load_german_prose
from apertus_jax.data.megatron import (
    IndexedDataset,
    MegatronSpec,
    parse_blend,
    read_documents,
    write_indexed_dataset,
)

from . import megatron_reference as reference


@pytest.fixture(scope="module")
def prose_ids(tekken):
    """tekken ids of 40 German prose documents, `[BoD] + ids + [EoD]` (ids up to ~130k: they need int32)."""
    return [tekken.encode_document(d["text"]) for d in load_german_prose()[:40]]


@pytest.mark.parametrize("dtype", [np.uint16, np.int32])
def test_round_trip_with_megatrons_reader_and_builder(prose_ids, dtype, tmp_path):
    documents = [d % 65536 for d in prose_ids] if dtype == np.uint16 else prose_ids
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    summary = write_indexed_dataset(ours, documents, dtype)
    assert summary == {"documents": 40, "tokens": sum(len(d) for d in documents)}
    read, document_indices = reference.read_indexed(ours)
    assert np.array_equal(document_indices, np.arange(41))  # one sequence per document, as Megatron writes
    assert len(read) == 40 and all(np.array_equal(a, b) and a.dtype == dtype for a, b in zip(read, documents))

    reference.write_indexed(theirs, documents, dtype)
    dataset = read_documents(theirs)
    assert len(dataset) == 40 and dataset.dtype == dtype
    assert all(np.array_equal(a, b) for a, b in zip(dataset, documents))
    assert np.array_equal(dataset.get(3, 5, 7), documents[3][5:12])
    for suffix in (".bin", ".idx"):  # byte for byte the files Megatron's builder writes
        assert open(ours + suffix, "rb").read() == open(theirs + suffix, "rb").read()


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.uint16, np.int32, np.int64])
def test_every_dtype_code_round_trips(dtype, tmp_path):
    # Format only: UTF-8 bytes of real text as ids (shifted into int8's range for int8).
    texts = [d["text"][:300] for d in load_german_prose()[:5]]
    documents = [
        np.frombuffer(t.encode(), np.uint8).astype(np.int64) - (128 if dtype == np.int8 else 0) for t in texts
    ]
    write_indexed_dataset(str(tmp_path / "d"), documents, dtype)
    code = open(str(tmp_path / "d.idx"), "rb").read()[17]
    assert megatron.DTYPE_CODES[code] == dtype
    assert [list(a) for a in reference.read_indexed(str(tmp_path / "d"))[0]] == [list(d) for d in documents]


def test_writer_refuses_ids_the_dtype_cannot_hold_and_writes_nothing(prose_ids, tmp_path):
    with pytest.raises(ValueError, match=r"document 0 holds id \d+, outside \[0, 65535\] of dtype uint16"):
        write_indexed_dataset(str(tmp_path / "d"), prose_ids, np.uint16)
    with pytest.raises(ValueError, match="dtype uint32 has no code"):
        write_indexed_dataset(str(tmp_path / "d"), prose_ids, np.uint32)
    with pytest.raises(ValueError, match="no documents to write"):
        write_indexed_dataset(str(tmp_path / "d"), [], np.int32)
    assert os.listdir(tmp_path) == []
    write_indexed_dataset(str(tmp_path / "d"), prose_ids[:2], np.int32)
    with pytest.raises(FileExistsError, match="d.idx exists"):
        write_indexed_dataset(str(tmp_path / "d"), prose_ids[:3], np.int32)
    assert len(read_documents(str(tmp_path / "d"))) == 2


def _broken(tmp_path, documents, edit):
    prefix = str(tmp_path / "broken")
    write_indexed_dataset(prefix, documents, np.int32)
    edit(prefix)
    return prefix


def _patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _truncate(path, size):
    with open(path, "r+b") as f:
        f.truncate(size)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda p: _truncate(p + ".bin", 1000),
            r"broken.bin: 1000 bytes, but sequence \d+ of .* spans bytes",
        ),
        (lambda p: _patch(p + ".idx", 0, b"NOTANIDX\x00"), r"broken.idx: not a Megatron index \(magic"),
        (
            lambda p: _patch(p + ".idx", 9, struct.pack("<Q", 2)),
            "broken.idx: index version 2, only version 1",
        ),
        (lambda p: _patch(p + ".idx", 17, bytes([6])), r"dtype code 6 \(float64, which holds no token ids\)"),
        (lambda p: _truncate(p + ".idx", 100), r"broken.idx: truncated \(100 bytes"),
        # The last document index says 41 sequences where the file holds 40.
        (
            lambda p: _patch(p + ".idx", os.path.getsize(p + ".idx") - 8, struct.pack("<q", 41)),
            "document indices must rise from 0 to the sequence count 40; an index points past the end",
        ),
        # Sequence 0's pointer moved past the end of the .bin.
        (lambda p: _patch(p + ".idx", 34 + 4 * 40, struct.pack("<q", 10**9)), "spans bytes \\[1000000000"),
        (lambda p: open(p + ".bin", "ab").write(b"\x00" * 4), "are from different writes"),
    ],
)
def test_broken_files_fail_with_one_line_naming_the_file(prose_ids, tmp_path, edit, message):
    prefix = _broken(tmp_path, prose_ids, edit)
    with pytest.raises(ValueError, match=message) as error:
        IndexedDataset(prefix)
    assert "\n" not in str(error.value)


def test_missing_half_and_dtype_too_small_for_the_tokenizer(prose_ids, tekken, tmp_path):
    prefix = str(tmp_path / "d")
    write_indexed_dataset(prefix, [d % 65536 for d in prose_ids], np.uint16)
    spec = MegatronSpec(paths=(prefix,))
    with pytest.raises(
        ValueError, match=r"d.idx: dtype uint16 holds ids up to 65535, but the tokenizer has 131072"
    ):
        spec.load("web", tekken)
    os.remove(prefix + ".bin")
    with pytest.raises(FileNotFoundError, match=r"d.bin: no such file"):
        IndexedDataset(prefix)


def test_blend_strings_read_as_megatron_reads_data_path():
    assert parse_blend("0.3 /a 0.7 /b") == (("/a", "/b"), (0.3, 0.7))
    assert parse_blend(["30", "/a", "70", "/b"]) == (("/a", "/b"), (30.0, 70.0))
    assert parse_blend("/a /b") == (("/a", "/b"), None)
    assert parse_blend("/a") == (("/a",), None)
    with pytest.raises(ValueError, match="blend weights must be > 0"):
        parse_blend("0 /a 1 /b")
    assert MegatronSpec(paths="1 /a 2 /b").paths == ("1", "/a", "2", "/b")
