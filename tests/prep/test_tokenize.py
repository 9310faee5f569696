"""Distributed tokenization on datatrove: 1 task bit for bit a single-process write, N tasks same tokens."""

import itertools
import json
import os
import pathlib

import pytest
from datatrove.executor import SlurmPipelineExecutor

from apertus_jax.data import shards, sources
from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.prep.tokenize import TokenizeJob, build_executors, run_tokenize, tokenize_job
from apertus_jax.tokenizers import load_tokenizer

SHARD_TOKENS = 20_000


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Six JSONL files of real text (German prose and UDHR translations) with ids and scores."""
    root = tmp_path_factory.mktemp("tokenize_inputs")
    docs = load_demo_documents("train")[::60]
    for i in range(6):
        with open(root / f"part-{i}.jsonl", "w", encoding="utf-8") as f:
            for j, d in enumerate(docs[i::6]):
                f.write(json.dumps({"id": d["doc_id"], "text": d["text"], "score": float(j % 5)}) + "\n")
    (root / "part-6.jsonl").write_text('{"id": "empty", "text": "  "}\n')
    return root


def _job(inputs, out, tasks, workers=1):
    executor = {"kind": "local", "workers": workers, "skip_completed": False, "slurm": {}, "ray": {}}
    return TokenizeJob(
        inputs=[str(inputs)],
        out=str(out),
        tokenizer="tekken",
        source="demo corpus",
        licence="see DATA_CARD.md",
        score_field="score",
        shard_tokens=SHARD_TOKENS,
        batch_documents=64,
        tasks=tasks,
        executor=executor,
    )


@pytest.fixture(scope="module")
def reference(inputs, tmp_path_factory):
    """One process writing the same files in order: the algorithm the command had before the executors."""
    tokenizer = load_tokenizer("tekken")
    out = tmp_path_factory.mktemp("reference") / "set"
    stats = sources.RawStats()
    documents = sources.iter_raw_documents([str(inputs)], "jsonl", stats, score_field="score")
    with shards.ShardWriter(
        out, tokenizer, source="demo corpus", licence="see DATA_CARD.md", shard_tokens=SHARD_TOKENS
    ) as writer:
        while batch := list(itertools.islice(documents, 64)):
            for doc, ids in zip(batch, tokenizer.encode_batch([d.text for d in batch])):
                writer.write([tokenizer.bod_id, *ids, tokenizer.eod_id], doc.doc_id, doc.score)
    return out, stats


def _records(path) -> dict[str, bytes]:
    manifest = shards.load_manifest(path)
    source = shards.ShardSource(path, load_tokenizer("tekken"))
    return manifest, {
        shards.decode_metadata(source._record(i))["id"]: source[i].tobytes() for i in range(len(source))
    }


@pytest.mark.slow
def test_one_task_is_bit_identical(inputs, reference, tmp_path):
    ref_dir, stats = reference
    manifest = run_tokenize(_job(inputs, tmp_path / "one", 1))
    ref = shards.load_manifest(ref_dir)
    assert len(manifest["shards"]) == len(ref["shards"]) > 1
    for ours, theirs in zip(manifest["shards"], ref["shards"]):
        assert (tmp_path / "one" / ours["path"]).read_bytes() == (ref_dir / theirs["path"]).read_bytes()
        assert (ours["documents"], ours["tokens"]) == (theirs["documents"], theirs["tokens"])
    assert (manifest["documents"], manifest["tokens"], manifest["tokenizer"]) == (
        ref["documents"],
        ref["tokens"],
        ref["tokenizer"],
    )
    assert (
        (manifest["files"], manifest["skipped_empty_documents"])
        == (stats.files, stats.skipped_empty)
        == (7, 1)
    )
    assert manifest["tasks"] == 1 and manifest["source"] == "demo corpus"
    assert sorted(os.listdir(tmp_path)) == ["one"]  # no staging directory left


@pytest.mark.slow
def test_four_tasks_same_token_multiset(inputs, reference, tmp_path):
    ref_dir, _ = reference
    manifest = run_tokenize(_job(inputs, tmp_path / "four", 4, workers=2))
    assert manifest["tasks"] == 4 and len({s["path"].split("/")[1] for s in manifest["shards"]}) == 4
    ref_manifest, ref_records = _records(ref_dir)
    _, records = _records(tmp_path / "four")
    assert records == ref_records  # same documents, each with the same tokens
    assert (manifest["documents"], manifest["tokens"]) == (ref_manifest["documents"], ref_manifest["tokens"])
    assert manifest["files"] == 7 and manifest["skipped_empty_documents"] == 1


def test_empty_input_leaves_nothing(tmp_path):
    empty = tmp_path / "in"
    empty.mkdir()
    (empty / "a.jsonl").write_text('{"text": ""}\n')
    with pytest.raises(FileNotFoundError) as raised:
        run_tokenize(_job(empty, tmp_path / "out", 2))
    assert (
        str(raised.value)
        == f"no documents to write from {empty}: the input is empty or every document was removed"
    )
    assert sorted(os.listdir(tmp_path)) == ["in"]
    with pytest.raises(FileExistsError, match="--overwrite"):
        run_tokenize(_job(empty, empty, 1))


def test_slurm_executors(inputs, tmp_path):
    job = _job(inputs, tmp_path / "out", 3)
    job.executor = {
        "kind": "slurm",
        "workers": 2,
        "skip_completed": True,
        "slurm": {"partition": "normal", "time": "01:00:00"},
        "ray": {},
    }
    job.logging_dir = str(tmp_path / "logs")
    executors = build_executors(job)
    assert all(isinstance(e, SlurmPipelineExecutor) for e in executors.values())
    assert executors["tokenize"].tasks == 3 and executors["merge"].tasks == 1
    assert executors["merge"].depends is executors["tokenize"]
    assert pathlib.Path(job.staging).name == ".out.staging"


@pytest.mark.slow
def test_command_line_job_runs_tasks(inputs, reference, tmp_path):
    job = tokenize_job(
        [str(inputs)],
        str(tmp_path / "cli"),
        "tekken",
        "demo corpus",
        "see DATA_CARD.md",
        score_field="score",
        tasks=3,
        shard_tokens=SHARD_TOKENS,
    )
    assert job.executor == {"kind": "local", "workers": 1, "skip_completed": False, "slurm": {}, "ray": {}}
    assert job.batch_documents == 1024 and job.logging_dir is None
    manifest = run_tokenize(job)
    assert manifest["tasks"] == 3
    assert _records(tmp_path / "cli")[1] == _records(reference[0])[1]


def test_command_line_job_on_slurm_needs_a_logging_dir(tmp_path):
    slurm = {
        "partition": "normal",
        "time": "04:00:00",
        "cpus_per_task": 1,
        "mem_per_cpu_gb": 4,
        "venv_path": None,
    }
    job = tokenize_job(
        ["in"],
        "out",
        "tekken",
        "s",
        "l",
        executor="slurm",
        workers=8,
        slurm=slurm,
        logging_dir="/scratch/logs",
    )
    assert job.executor == {"kind": "slurm", "workers": 8, "skip_completed": True, "slurm": slurm, "ray": {}}
    assert job.logging_dir == "/scratch/logs"
    with pytest.raises(ValueError, match="--executor=slurm/ray needs --logging_dir on shared storage"):
        tokenize_job(["in"], "out", "tekken", "s", "l", executor="ray")
