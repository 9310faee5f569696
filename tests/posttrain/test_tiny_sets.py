"""The tiny post-training sets: the shipped files are what `tiny_sets` writes, line for line and byte for
byte."""

import json
import os
import shutil

from apertus_jax.posttrain import tiny_sets


def _items():
    with open(os.path.join(tiny_sets.ASSETS, "qa_source.json"), encoding="utf-8") as f:
        return json.load(f)


def test_shipped_sets_are_the_builders_output():
    items = _items()
    for name, lines in [
        ("chat_tiny.jsonl", tiny_sets.conversations(items)),
        ("qrpo_tiny.jsonl", tiny_sets.preference_records(items)),
    ]:
        with open(os.path.join(tiny_sets.ASSETS, name), encoding="utf-8") as f:
            assert [json.loads(line) for line in f] == lines
    multi_turn = [c for c in tiny_sets.conversations(items) if len(c["messages"]) > 3]
    assert len(multi_turn) == 6 and any(c["messages"][0]["role"] == "system" for c in multi_turn)
    assert len(tiny_sets.conversations(items)) == 18 and len(tiny_sets.preference_records(items)) == 12


def test_write_tiny_sets_rewrites_the_shipped_bytes(tmp_path):
    shutil.copy(os.path.join(tiny_sets.ASSETS, "qa_source.json"), tmp_path)
    written = tiny_sets.write_tiny_sets(str(tmp_path))
    assert written == [str(tmp_path / "chat_tiny.jsonl"), str(tmp_path / "qrpo_tiny.jsonl")]
    for path in written:
        with open(os.path.join(tiny_sets.ASSETS, os.path.basename(path)), "rb") as shipped:
            assert open(path, "rb").read() == shipped.read()
    assert sorted(os.listdir(tmp_path)) == ["chat_tiny.jsonl", "qa_source.json", "qrpo_tiny.jsonl"]
