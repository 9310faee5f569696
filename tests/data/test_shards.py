"""Shard sets written by `prep.tokenize` (the tokenize_data command's job): round trip, manifest, atomic
writes, clear errors on bad input."""

import copy
import json
import os
import shutil

import numpy as np
import pytest

from apertus_jax.data import mixture, shards
from apertus_jax.data.config import parse_pipeline
from apertus_jax.data.run_tokenizer import TokenizerMismatchError
from apertus_jax.prep.tokenize import run_tokenize, tokenize_job

from .conftest import train_iterator


def tokenize(tmp_path, inputs, out_name="shards"):
    """The manifest of the shard set `tmp_path/out_name` written from `inputs` (`tokenize_data`'s job)."""
    job = tokenize_job(
        [str(i) for i in inputs],
        str(tmp_path / out_name),
        "tekken",
        "demo-german",
        "GPL-2.0+",
        score_field="score",
        shard_tokens=4000,
    )
    return run_tokenize(job)


@pytest.fixture(scope="module")
def shard_set(tmp_path_factory, german_jsonl):
    tmp_path = tmp_path_factory.mktemp("shards")
    assert tokenize(tmp_path, [german_jsonl])["documents"] == 200
    return tmp_path / "shards"


@pytest.mark.slow
def test_cli_round_trip_and_manifest(shard_set, german_jsonl, tekken):
    manifest = shards.load_manifest(shard_set, tekken)
    texts = [json.loads(line) for line in german_jsonl.read_text().splitlines()]
    assert manifest["documents"] == len(texts) == 200
    assert manifest["tokenizer"]["checksum"] == tekken.checksum and manifest["licence"] == "GPL-2.0+"
    assert len(manifest["shards"]) > 1 and sum(s["documents"] for s in manifest["shards"]) == 200
    source = shards.ShardSource(shard_set, tekken)
    for index in (0, 57, 199):
        np.testing.assert_array_equal(source[index], tekken.encode_document(texts[index]["text"]))
    assert manifest["tokens"] == sum(len(source[i]) for i in range(len(source)))
    np.testing.assert_array_equal(source.scores(), [t["score"] for t in texts])
    assert not any(name.startswith(".") for name in os.listdir(shard_set.parent))


def test_record_layout_round_trip():
    record = shards.encode_record(np.array([1, 5, 131071, 2]), "doc-7", 2.5)
    np.testing.assert_array_equal(shards.decode_tokens(record), [1, 5, 131071, 2])
    assert shards.decode_metadata(record) == {"id": "doc-7", "score": 2.5}
    assert shards.decode_metadata(shards.encode_record(np.array([1, 2]))) == {}


def test_arrayrecord_component_sorted_by_score(shard_set, tekken):
    config = {
        "components": {
            "web": {"kind": "arrayrecord", "paths": [str(shard_set)], "order": "sorted", "epochs": 1}
        },
        "goldfish": {"k": 0},
    }
    iterator = train_iterator(config, tekken, 128, 4)
    spec = iterator.pipeline.components["web"]
    component = spec.load("web", tekken)
    order = mixture.host_documents(component, spec, split_seed=0, process_index=0, process_count=1)
    assert np.all(np.diff(component.scores[order]) >= 0)
    first = next(iterator)["tokens"][0]
    np.testing.assert_array_equal(first, np.concatenate([component.documents[i] for i in order[:5]])[:128])


def test_missing_shard_is_named(shard_set, tmp_path, tekken):
    broken = tmp_path / "broken"
    shutil.copytree(shard_set, broken)
    second = shards.load_manifest(shard_set)["shards"][1]["path"]
    (broken / second).unlink()
    with pytest.raises(FileNotFoundError, match=second):
        shards.ShardSource(broken, tekken)


def test_a_path_that_is_no_shard_folder_is_named_as_such(tmp_path, german_jsonl):
    """Before: a missing folder and a file were both `PATH/manifest.json: no shard manifest; ...`."""
    nowhere, empty = tmp_path / "nowhere", tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError) as missing:
        shards.load_manifest(nowhere)
    assert str(missing.value) == (
        f"{nowhere} does not exist; write a shard set there with `python -m experiments.tokenize_data "
        f"--out={nowhere}`, or pass the folder it wrote"
    )
    with pytest.raises(ValueError) as a_file:
        shards.load_manifest(german_jsonl)
    assert str(a_file.value) == (
        f"{german_jsonl} is a file, not a shard folder; tokenize it into one with `python -m "
        f"experiments.tokenize_data --input={german_jsonl} --out=FOLDER` and pass FOLDER"
    )
    with pytest.raises(FileNotFoundError, match=f"^{empty}/manifest.json: no shard manifest"):
        shards.load_manifest(empty)


def test_an_arrayrecord_component_checks_its_folders_before_the_run(tmp_path, german_jsonl):
    """The run's input check (`PipelineSpec.check_inputs`) names the component; before, the arrayrecord kind
    checked nothing there and the error came once the run had started reading."""
    pipeline = parse_pipeline({"components": {"text": {"kind": "arrayrecord", "paths": [str(german_jsonl)]}}})
    with pytest.raises(
        ValueError, match=f"^data.pipeline.components.text: {german_jsonl} is a file, not a shard"
    ):
        pipeline.check_inputs()


def test_shard_from_another_tokenizer_is_rejected_naming_both_fixes(shard_set, tekken):
    """Before: only the fix of re-tokenizing, inside 400+ characters of two full sha256s."""
    other = copy.copy(tekken)
    other.name, other.checksum = "sentencepiece:other.model", "0" * 64
    with pytest.raises(TokenizerMismatchError) as raised:
        shards.ShardSource(shard_set, other)
    assert str(raised.value) == (
        f"{shard_set}: tokenized with tekken (sha256 {tekken.checksum[:12]}), the run with "
        "sentencepiece:other.model (sha256 000000000000); train with --config.data.tokenizer=tekken, "
        "or re-tokenize with experiments.tokenize_data --tokenizer=sentencepiece:.../other.model"
    )


def test_token_id_beyond_vocab(tmp_path, tekken):
    with pytest.raises(ValueError, match="outside"):
        with shards.ShardWriter(tmp_path / "bad", tekken, source="s", licence="l") as writer:
            writer.write(np.array([1, 131072, 2]))
    assert not (tmp_path / "bad").exists() and os.listdir(tmp_path) == []
    # A set written for a bigger vocabulary but labelled with this tokenizer fails when read.
    bigger = copy.copy(tekken)
    bigger.vocab_size = 200_000
    with shards.ShardWriter(tmp_path / "big", bigger, source="s", licence="l") as writer:
        writer.write(np.array([1, 150_000, 2]))
    with pytest.raises(ValueError, match="token id outside"):
        shards.ShardSource(tmp_path / "big", tekken)[0]


def test_empty_source_fails_and_writes_nothing(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"text": "   "}\n{"text": ""}\n')
    with pytest.raises(FileNotFoundError, match="input is empty"):
        tokenize(tmp_path, [empty], "out")
    assert sorted(os.listdir(tmp_path)) == ["empty.jsonl"]


def test_invalid_utf8_is_replaced_and_counted(tmp_path, tekken):
    raw = tmp_path / "raw.jsonl"
    raw.write_bytes(b'{"text": "gr\xfc\xdfe aus Z\xfcrich"}\n{"text": "ok \xef\xbf\xbd"}\n')
    assert tokenize(tmp_path, [raw], "out") == shards.load_manifest(tmp_path / "out")
    manifest = shards.load_manifest(tmp_path / "out", tekken)
    assert manifest["replaced_invalid_utf8"] == 3 and manifest["documents"] == 2
    text = tekken.decode(shards.ShardSource(tmp_path / "out", tekken)[0])
    assert text == "gr\ufffd\ufffde aus Z\ufffdrich"


def test_existing_output_needs_overwrite(shard_set, german_jsonl):
    with pytest.raises(FileExistsError, match="--overwrite"):
        tokenize(shard_set.parent, [german_jsonl])
