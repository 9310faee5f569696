"""Both prep paths write shards through one writer and cut them by one rule: tokens per shard."""

import inspect
import json
import pathlib
import re

import numpy as np
import pytest
from datatrove.data import Document

from apertus_jax.data import shards
from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.data.shards import ShardSource, load_manifest
from apertus_jax.prep import shard_parts, steps, tokenize
from apertus_jax.prep.executors import build_stages
from apertus_jax.tokenizers import load_tokenizer
from configs.prep import demo as demo_config

LIMIT = 1_000  # tokens per shard: several shards from the documents below, some longer than it


@pytest.fixture(scope="module")
def documents():
    """Every 300th demo training document (German prose and UDHR translations, real text), scored."""
    docs = load_demo_documents("train")[::300]
    return [
        Document(text=d["text"], id=d["doc_id"], metadata={"lang": d["lang"], "score": float(i % 7)})
        for i, d in enumerate(docs)
    ]


def _write_shards(output_dir):
    return steps.WriteShards(
        str(output_dir), "tekken", "demo", "see DATA_CARD.md", "score", LIMIT, batch_documents=16
    )


def _tokenize_shards(output_dir):
    return tokenize.TokenizeShards(str(output_dir), "tekken", "demo", "see DATA_CARD.md", LIMIT, 16)


def _assert_follows_the_rule(shards, lengths):
    """A shard is closed once it holds at least LIMIT tokens, and only then."""
    start = 0
    for index, shard in enumerate(shards):
        sizes = lengths[start : start + shard["documents"]]
        assert shard["tokens"] == sum(sizes) and sizes
        assert sum(sizes[:-1]) < LIMIT  # no document went into a full shard
        if index < len(shards) - 1:
            assert shard["tokens"] >= LIMIT  # no shard was closed before it was full
        start += shard["documents"]
    assert start == len(lengths)


@pytest.mark.slow
def test_both_paths_write_the_same_shards_by_one_rule(documents, tmp_path):
    tekken = load_tokenizer("tekken")
    lengths = [len(tekken.encode(doc.text)) + 2 for doc in documents]
    assert sum(lengths) > 5 * LIMIT and len(documents) % 16  # several shards, a short last batch

    passed = list(_write_shards(tmp_path / "prepare").run(iter(documents), rank=3))
    assert [doc.id for doc in passed] == [doc.id for doc in documents]  # the step passes documents on
    assert list(_tokenize_shards(tmp_path / "tokenize").run(iter(documents), rank=3)) == []

    parts = {name: tmp_path / name / "parts" / "00003" for name in ("prepare", "tokenize")}
    manifests = {name: load_manifest(part) for name, part in parts.items()}
    for manifest in manifests.values():
        assert len(manifest["shards"]) >= 5
        assert (manifest["documents"], manifest["tokens"]) == (len(documents), sum(lengths))
        _assert_follows_the_rule(manifest["shards"], lengths)
    prepare, tokenized = (
        {key: value for key, value in manifests[name].items() if key not in ("created", "directory")}
        for name in parts
    )
    assert prepare == tokenized
    for shard in manifests["prepare"]["shards"]:
        written = (parts["prepare"] / shard["path"]).read_bytes()
        assert written == (parts["tokenize"] / shard["path"]).read_bytes()

    source = ShardSource(parts["prepare"], tekken)
    for index in (0, len(documents) // 2, len(documents) - 1):
        np.testing.assert_array_equal(source[index], tekken.encode_document(documents[index].text))
    np.testing.assert_array_equal(source.scores(), [doc.metadata["score"] for doc in documents])


def test_merged_manifest_lists_every_part(documents, tmp_path):
    for rank in (0, 1):
        list(_write_shards(tmp_path).run(iter(documents[rank::2]), rank=rank))
    assert list(steps.MergeShardManifests(str(tmp_path), ["documents.jsonl"]).run()) == []
    text = (tmp_path / "manifest.json").read_text()
    merged = load_manifest(tmp_path)
    merged.pop("directory")
    assert text == json.dumps(merged, indent=2) + "\n"
    parts = [load_manifest(tmp_path / "parts" / f"{rank:05d}") for rank in (0, 1)]
    assert merged["tasks"] == 2 and merged["documents"] == len(documents)
    assert [s["path"] for s in merged["shards"]] == [
        f"parts/{rank:05d}/{s['path']}" for rank, part in enumerate(parts) for s in part["shards"]
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "parts"]


def test_a_task_without_documents_writes_no_part(tmp_path):
    for step in (_write_shards(tmp_path), _tokenize_shards(tmp_path)):
        assert list(step.run(iter([]), rank=0)) == [] and list(step.run(None, rank=1)) == []
    assert list(tmp_path.iterdir()) == []


def test_one_shard_size_setting_for_both_commands(small_inputs, small_config, tmp_path, run_job):
    assert shards.SHARD_TOKENS == 268_435_456  # 256 Mi tokens
    helpshort = run_job(
        "experiments.tokenize_data", "--helpshort", cwd=pathlib.Path(__file__).parents[2]
    ).stdout
    flag_default = re.search(r"--shard_tokens: .*\n\s+\(default: '(\d+)'\)", helpshort)
    defaults = {
        "ShardWriter": inspect.signature(shards.ShardWriter).parameters["shard_tokens"].default,
        "WriteShards": steps.WriteShards("out").shard_tokens,
        "TokenizeShards": tokenize.TokenizeShards("out", "tekken", "s", "l").shard_tokens,
        "TokenizeJob": tokenize.TokenizeJob([], "out", "tekken", "s", "l").shard_tokens,
        "configs/prep/demo.py": demo_config.get_config().shards.shard_tokens,
        "tokenize_data --shard_tokens": int(flag_default.group(1)),
    }
    assert defaults == dict.fromkeys(defaults, shards.SHARD_TOKENS)
    config = small_config(small_inputs, tmp_path)
    config.shards.shard_tokens = LIMIT
    (writer,) = [step for step in build_stages(config)["select"] if isinstance(step, steps.WriteShards)]
    assert writer.shard_tokens == LIMIT


def test_batches():
    docs = [Document(text=str(i), id=str(i)) for i in range(5)]
    assert [[d.id for d in batch] for batch in shard_parts.batches(iter(docs), 2)] == [
        ["0", "1"],
        ["2", "3"],
        ["4"],
    ]
    assert shard_parts.batches(iter([]), 2) is None and shard_parts.batches(None) is None
    with pytest.raises(ValueError, match="at least 1"):
        shard_parts.batches(docs, 0)


def test_no_part_written_names_the_inputs_not_the_staging_folder(tmp_path):
    """Before: `no shard parts under .../.NAME.staging/parts: ...`, a folder the user never named."""
    staging = tmp_path / ".shards.staging"
    (staging / "parts").mkdir(parents=True)
    inputs = [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
    with pytest.raises(FileNotFoundError) as raised:
        list(steps.MergeShardManifests(str(staging), inputs).run())
    assert str(raised.value) == (
        f"no documents to write from {inputs[0]}, {inputs[1]}: the input is empty or every document was removed"
    )
