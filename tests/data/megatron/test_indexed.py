"""Megatron .bin/.idx: round trips against a transcription of Megatron's reader and builder
(`megatron_reference.py`), every dtype code, and one-line errors for broken files (nothing written)."""

import json
import os
import struct

import numpy as np
import pytest

from apertus_jax.data.config import BATCH_KEYS, parse_pipeline
from apertus_jax.data.demo_corpus import load_german_prose
from apertus_jax.data.megatron import indexed as megatron
from apertus_jax.data.megatron.indexed import (
    IndexedDataset,
    MegatronSpec,
    parse_blend,
    read_documents,
    write_indexed_dataset,
)

from ..conftest import train_iterator
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
    # Five documents fit (ids folded below 2^16), the sixth does not: the partial .bin is removed too.
    documents = [d % 65536 for d in prose_ids[:5]] + [prose_ids[5]]
    assert prose_ids[5].max() > 65535
    with pytest.raises(ValueError, match=r"document 5 holds id \d+, outside \[0, 65535\] of dtype uint16"):
        write_indexed_dataset(str(tmp_path / "d"), documents, np.uint16)
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
    for missing_a_word in ("0.3 /a 0.7", "0.3 /a /b 0.7 /c"):
        with pytest.raises(
            ValueError, match="'0.3' reads as a weight, but the words are not weight and prefix"
        ):
            parse_blend(missing_a_word)
    assert MegatronSpec(paths="1 /a 2 /b").paths == ("1", "/a", "2", "/b")
    with pytest.raises(
        ValueError, match="data.pipeline.components.web: order='sorted' needs document scores"
    ):
        parse_pipeline({"components": {"web": {"kind": "megatron", "paths": "/a", "order": "sorted"}}})


SEQ_LEN = 64


@pytest.fixture(scope="module")
def blend_prefixes(tekken, tmp_path_factory):
    """Two Megatron datasets of German prose (tekken ids, int32): 300 documents and 60 others."""
    directory, prose = tmp_path_factory.mktemp("megatron_blend"), load_german_prose()
    written = {}
    for name, (low, high) in {"many": (1000, 1300), "few": (2000, 2060)}.items():
        documents = [tekken.encode_document(d["text"]) for d in prose[low:high]]
        write_indexed_dataset(str(directory / name), documents, np.int32)
        written[name] = (str(directory / name), documents)
    return written


def _pipeline(blend_prefixes, german_jsonl):
    many, few = blend_prefixes["many"][0], blend_prefixes["few"][0]
    return {
        "components": {
            "web": {"kind": "megatron", "paths": f"0.4 {many} 0.6 {few}"},
            "german": {"kind": "jsonl", "paths": [str(german_jsonl)]},
        },
        "stages": [
            {"name": "stage1", "until_tokens": 30 * SEQ_LEN, "weights": {"web": 0.8, "german": 0.2}},
            {"name": "stage2", "weights": {"web": 1.0}, "seed": 3},
        ],
        "goldfish": {"k": 4, "h": 13, "hash": "apertus"},
    }


def _take(iterator, count):
    return [next(iterator) for _ in range(count)]


def test_blend_weights_are_token_shares_of_the_component(blend_prefixes, tekken):
    spec = parse_pipeline(_pipeline(blend_prefixes, "unused.jsonl")).components["web"]
    assert isinstance(spec, MegatronSpec) and spec.describe()["weights"] == [0.4, 0.6]
    component = spec.load("web", tekken)
    lengths = np.array([len(component.documents[i]) for i in range(len(component.documents))])
    many = len(blend_prefixes["many"][1])
    in_many = (
        np.asarray(
            megatron.blend_selection(
                [IndexedDataset(blend_prefixes[n][0]) for n in ("many", "few")], (0.4, 0.6), 0
            )
        )
        < many
    )
    share = lengths[in_many].sum() / lengths.sum()
    assert abs(share - 0.4) < 0.01  # token shares, whatever the prefixes' sizes (300 and 60 documents)
    assert lengths.sum() == pytest.approx(
        sum(len(d) for p in blend_prefixes.values() for d in p[1]), rel=0.01
    )
    assert component.mean_tokens == pytest.approx(lengths.mean())
    # The few-document prefix is repeated to fill its share: each of its documents about 4 times.
    assert len(component.documents) - in_many.sum() > 3 * len(blend_prefixes["few"][1])


def test_megatron_component_resumes_bitwise_across_stages(blend_prefixes, german_jsonl, tekken):
    config = _pipeline(blend_prefixes, german_jsonl)
    expected = _take(train_iterator(config, tekken, SEQ_LEN, 4), 14)
    documents = {tuple(d[: SEQ_LEN + 1]) for p in blend_prefixes.values() for d in p[1]}
    rows = np.concatenate([np.concatenate([b["tokens"], b["targets"][:, -1:]], axis=1) for b in expected])
    # Rows that start a document start with a Megatron document (German prose of the blend or the jsonl).
    starts = [tuple(r[: SEQ_LEN + 1]) for r in rows if r[0] == tekken.bod_id]
    assert sum(any(s[: len(d)] == d for d in documents) for s in starts) > len(starts) // 2
    assert any((b["loss_mask"] == 0).any() for b in expected)  # Goldfish dropped targets
    for save_step in (3, 7, 8, 11):  # stage 2 starts at row 30, in the 8th batch
        first = train_iterator(config, tekken, SEQ_LEN, 4)
        before = _take(first, save_step)
        resumed = train_iterator(config, tekken, SEQ_LEN, 4)
        resumed.set_state(json.loads(json.dumps(first.get_state())))
        for actual, reference_batch in zip(before + _take(resumed, 14 - save_step), expected):
            for key in BATCH_KEYS:
                np.testing.assert_array_equal(actual[key], reference_batch[key])


@pytest.mark.parametrize("bad_id", [131072, -5])
def test_an_id_outside_the_vocabulary_fails_on_read_naming_the_sequence(prose_ids, tekken, tmp_path, bad_id):
    documents = [d.copy() for d in prose_ids[:3]]
    documents[2][4] = bad_id
    write_indexed_dataset(str(tmp_path / "d"), documents, np.int32)
    component = MegatronSpec(paths=str(tmp_path / "d")).load("web", tekken)
    np.testing.assert_array_equal(component.documents[1], prose_ids[1])
    with pytest.raises(ValueError, match=r"d.bin: sequence 2 holds an id outside \[0, 131072\)"):
        component.documents[2]
