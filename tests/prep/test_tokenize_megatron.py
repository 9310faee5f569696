"""experiments.tokenize_data --format=megatron: the shard set's documents as a Megatron prefix that Megatron's
reader (transcribed) reads, its manifest beside it; a dtype too small for the tokenizer: one line, exit 2,
nothing written."""

import json
import os

import numpy as np
import pytest

from apertus_jax.data import shards
from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.data.goldfish.drop_masks import GoldfishSpec
from apertus_jax.data.megatron.gpt_samples import GPTBatches, first_rows, gpt_samples
from apertus_jax.data.megatron.indexed import MegatronSpec, read_documents
from apertus_jax.data.run_tokenizer import demo_tokenizer
from apertus_jax.prep.tokenize import TokenizeJob, run_tokenize
from apertus_jax.tokenizers import load_tokenizer

from ..data.megatron import megatron_reference as reference

LOCAL = {"kind": "local", "workers": 1, "skip_completed": False, "slurm": {}, "ray": {}}


def _inputs(directory):
    """Two JSONL files of real text (German prose and UDHR translations)."""
    docs = load_demo_documents("train")[::200]
    for i in range(2):
        with open(directory / f"part-{i}.jsonl", "w", encoding="utf-8") as f:
            for d in docs[i::2]:
                f.write(json.dumps({"id": d["doc_id"], "text": d["text"]}) + "\n")
    return directory


def _job(inputs, out, **fields):
    return TokenizeJob(
        inputs=[str(inputs)],
        out=str(out),
        tokenizer="tekken",
        source="demo corpus",
        licence="see DATA_CARD.md",
        batch_documents=16,
        executor=LOCAL,
        **fields,
    )


@pytest.mark.slow
def test_megatron_output_holds_the_shard_sets_documents(tmp_path):
    (tmp_path / "in").mkdir()
    inputs = _inputs(tmp_path / "in")
    run_tokenize(_job(inputs, tmp_path / "set"))
    expected = shards.ShardSource(tmp_path / "set", load_tokenizer("tekken"))
    manifest = run_tokenize(_job(inputs, tmp_path / "web", output_format="megatron"))
    assert sorted(os.listdir(tmp_path)) == ["in", "set", "web.bin", "web.idx", "web.json"]  # no staging left
    assert manifest == json.loads((tmp_path / "web.json").read_text())
    assert manifest["megatron_dtype"] == "int32"  # tekken's 131,072 ids do not fit uint16
    assert manifest["record_layout"].startswith("int32 LE tokens, one sequence per document, in .bin")
    assert manifest["tokenizer"]["checksum"] == load_tokenizer("tekken").checksum
    assert manifest["documents"] == len(expected) > 20 and manifest["tokens"] == expected.manifest["tokens"]
    ours = read_documents(tmp_path / "web")
    theirs, document_indices = reference.read_indexed(str(tmp_path / "web"))
    assert np.array_equal(document_indices, np.arange(len(expected) + 1))
    for i in range(len(expected)):
        assert np.array_equal(ours[i], expected[i]) and np.array_equal(theirs[i], expected[i])

    spec = MegatronSpec(paths=str(tmp_path / "web"))
    assert spec.describe()["prefixes"] == [
        {"prefix": str(tmp_path / "web"), "source": "demo corpus", "licence": "see DATA_CARD.md"}
        | {"documents": len(expected), "tokens": manifest["tokens"]}
    ]
    with pytest.raises(
        ValueError, match=r"web: tokenized with tekken .*, the run with sentencepiece:demo_bpe1024"
    ):
        spec.load("web", demo_tokenizer(1024))
    stream = gpt_samples(str(tmp_path / "web"), seq_len=32, seed=0, split="1", num_samples=10)
    with pytest.raises(
        ValueError, match=r"web: tokenized with tekken .*, the run with sentencepiece:demo_bpe1024"
    ):
        GPTBatches(
            stream, demo_tokenizer(1024), GoldfishSpec(), seq_len=32, batch_size=2, shard=0, num_shards=1
        )
    batches = GPTBatches(
        stream, load_tokenizer("tekken"), GoldfishSpec(), seq_len=32, batch_size=2, shard=0, num_shards=1
    )
    np.testing.assert_array_equal(next(batches)["tokens"], first_rows(stream, 2)[:, :32])

    two_tasks = run_tokenize(_job(inputs, tmp_path / "two", output_format="megatron", tasks=2))
    assert two_tasks["tasks"] == 2
    assert sorted(d.tobytes() for d in read_documents(tmp_path / "two")) == sorted(d.tobytes() for d in ours)


def test_dtype_too_small_for_the_tokenizer_is_one_line_and_nothing_is_written(tmp_path, run_job):
    inputs = _inputs(tmp_path)
    command = [
        "experiments.tokenize_data",
        f"--input={inputs}",
        "--tokenizer=tekken",
        f"--out={tmp_path / 'web'}",
        "--source=s",
        "--licence=l",
        "--format=megatron",
        "--megatron_dtype=uint16",
    ]
    before = sorted(os.listdir(tmp_path))
    result = run_job(*command)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0] == (
        "error: --megatron_dtype=uint16 holds ids up to 65535, but tokenizer tekken has 131072 ids; use int32 "
        "(or leave it unset for Megatron's default)"
    )
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.slow
def test_the_manifest_of_a_uint16_dataset_names_its_dtype(tmp_path):
    """The demo BPE's 1,024 ids: Megatron's uint16, and the manifest's record layout says so (not the int32
    records of the shard set it was merged from)."""
    (tmp_path / "in").mkdir()
    job = TokenizeJob(
        inputs=[str(_inputs(tmp_path / "in"))],
        out=str(tmp_path / "web"),
        tokenizer=f"sentencepiece:{demo_tokenizer(1024).path}",
        source="demo corpus",
        licence="see DATA_CARD.md",
        executor=LOCAL,
        output_format="megatron",
    )
    manifest = run_tokenize(job)
    assert manifest["megatron_dtype"] == "uint16" and read_documents(tmp_path / "web").dtype == np.uint16
    assert manifest["record_layout"].startswith("uint16 LE tokens, one sequence per document, in .bin")
