"""Shard sets and the tokenize_data CLI: round trip, manifest, atomic writes, clear errors on bad input."""

import copy
import json
import os
import shutil

import numpy as np
import pytest

from apertus_jax.data import components, mixture, shards
from apertus_jax.data.pipeline import build_train_pipeline
from experiments import tokenize_data


def run_cli(tmp_path, inputs, out_name="shards", *extra):
    argv = [f"--input={i}" for i in inputs] + [
        "--tokenizer=tekken",
        f"--out={tmp_path / out_name}",
        "--source=demo-german",
        "--licence=GPL-2.0+",
        "--score_field=score",
        "--shard_tokens=4000",
        *extra,
    ]
    return tokenize_data.main(argv)


@pytest.fixture(scope="module")
def shard_set(tmp_path_factory, german_jsonl):
    tmp_path = tmp_path_factory.mktemp("shards")
    assert run_cli(tmp_path, [german_jsonl]) == 0
    return tmp_path / "shards"


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
    iterator = build_train_pipeline(config, tekken, 128, 4)
    spec = iterator.config["components"]["web"]
    component = components.load_component("web", spec, tekken)
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
    with pytest.raises(FileNotFoundError, match="no shard manifest"):
        shards.ShardSource(tmp_path / "nowhere", tekken)


def test_shard_from_another_tokenizer_is_rejected(shard_set, tekken):
    other = copy.copy(tekken)
    other.name, other.checksum = "sentencepiece:other.model", "0" * 64
    with pytest.raises(ValueError, match="re-tokenize"):
        shards.ShardSource(shard_set, other)


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


def test_empty_source_fails_and_writes_nothing(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"text": "   "}\n{"text": ""}\n')
    assert run_cli(tmp_path, [empty], "out") == 2
    err = capsys.readouterr().err
    assert "input is empty" in err and err.startswith("error: ") and err.count("\n") == 1
    assert sorted(os.listdir(tmp_path)) == ["empty.jsonl"]


def test_invalid_utf8_is_replaced_and_counted(tmp_path, tekken):
    raw = tmp_path / "raw.jsonl"
    raw.write_bytes(b'{"text": "gr\xfc\xdfe aus Z\xfcrich"}\n{"text": "ok \xef\xbf\xbd"}\n')
    assert run_cli(tmp_path, [raw], "out") == 0
    manifest = shards.load_manifest(tmp_path / "out", tekken)
    assert manifest["replaced_invalid_utf8"] == 3 and manifest["documents"] == 2
    text = tekken.decode(shards.ShardSource(tmp_path / "out", tekken)[0])
    assert text == "gr\ufffd\ufffde aus Z\ufffdrich"


def test_existing_output_needs_overwrite(shard_set, german_jsonl, tmp_path, capsys):
    assert run_cli(shard_set.parent, [german_jsonl]) == 2
    assert "--overwrite" in capsys.readouterr().err
