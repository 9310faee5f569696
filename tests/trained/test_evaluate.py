"""apertus_jax.trained.evaluate on a trainer workdir (perplexity, memorization, bad input) and the quiet log of
`experiments.evaluate`; a run on its own shards scored on its own held-out data (a shard set, a JSONL file or
its config's `eval.heldout_paths`), or refused naming `--heldout`, and what was scored said in the result."""

import json
import logging
import math
import os
import shutil

import pytest

from apertus_jax.config.schema import parse
from apertus_jax.data.demo_corpus import load_german_prose
from apertus_jax.data.run_tokenizer import demo_tokenizer
from apertus_jax.data.shards import MANIFEST, ShardWriter
from apertus_jax.trained.evaluate import evaluate
from configs.runs import tiny_own_data

from ..conftest import write_tiny_workdir

# The user's text: German prose of the demo corpus, the first documents trained on, the next ones held out.
TRAINED, HELDOUT = slice(0, 40), slice(40, 43)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A workdir as the trainer writes it (config.json + an Orbax checkpoint at step 7) of a tiny model."""
    workdir = str(tmp_path_factory.mktemp("run"))
    write_tiny_workdir(workdir, 7)
    return workdir


@pytest.mark.slow
def test_perplexity_and_memorization_tasks_run(workdir):
    ppl = evaluate(workdir, "perplexity", limit=2, batch_size=4)
    assert ppl["step"] == 7 and ppl["num_documents"] == 2 and ppl["seq_len"] == 64
    assert ppl["data"] == "the demo corpus's held-out split (udhr, german_prose)"
    assert (
        100 < ppl["perplexity"] < 5000 and ppl["bits_per_byte"] > 0
    )  # random init: about the vocabulary size
    unseen = ppl["unseen_languages"]
    assert unseen["num_documents"] == 2 and unseen["num_tokens"] > 2 * ppl["num_tokens"]  # whole translations
    memo = evaluate(workdir, "memorization", limit=3, batch_size=3, prefix_len=8, suffix_len=8)
    assert memo["train"]["num_documents"] == 3 and memo["heldout"]["num_documents"] == 3
    assert memo["train"]["data"] == "the demo corpus's training split (udhr, german_prose)"
    assert 0 <= memo["train"]["rouge_l"] <= 1 and memo["train"]["exact_match"] == 0


@pytest.mark.slow
def test_bad_input_is_one_clear_error(workdir, tmp_path):
    with pytest.raises(ValueError, match="unknown --task='hellaswag'"):
        evaluate(workdir, "hellaswag")
    with pytest.raises(ValueError, match="--limit=-1 must be >= 0"):
        evaluate(workdir, "perplexity", limit=-1)
    with pytest.raises(FileNotFoundError, match="no config.json or checkpoints"):
        evaluate(str(tmp_path), "perplexity")


@pytest.mark.slow
def test_evaluate_cli_prints_no_library_info_lines(workdir, tmp_path, run_job):
    """Orbax's restore chatter stays out of the log; the result is printed."""
    output = tmp_path / "result.json"
    result = run_job(
        "experiments.evaluate", f"--workdir={workdir}", "--task=perplexity", "--limit=2", f"--output={output}"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    written = json.loads(output.read_text())
    assert written["num_documents"] == 2 and written["workdir"] == os.path.abspath(workdir)
    assert json.dumps(written, indent=2) in result.stdout and f"wrote {output}" in result.stdout
    noisy = [
        line for line in result.stderr.splitlines() if "orbax" in line.lower() or "backend 'tpu'" in line
    ]
    assert not noisy, noisy[:5]
    # The tokenizer is loaded once (before: its line twice, for the data and again for the model).
    assert [line[11:] for line in result.stderr.splitlines() if " tokenizer: " in line] == [
        f"tokenizer: the demo SentencePiece BPE (1024 ids) from {demo_tokenizer(1024).path}"
    ]


def test_missing_workdir_is_one_line_and_exit_2(tmp_path, run_job):
    result = run_job("experiments.evaluate", "--task=perplexity", f"--output={tmp_path}/r.json")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["error: --workdir is required"]
    assert not list(tmp_path.iterdir())


# What a --workdir must be (records.runs.WORKDIR_FIX), as the errors say it.
EXPECTED = "--workdir must be a directory written by `python -m experiments.pretrain --workdir=...`"


def test_a_missing_workdir_is_named_with_what_is_expected(tmp_path, run_job):
    """Before: "workdir DIR does not exist", what to give unsaid."""
    result = run_job("experiments.evaluate", f"--workdir={tmp_path / 'none'}", "--task=perplexity")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: workdir {tmp_path / 'none'} does not exist: {EXPECTED}"
    ]
    assert not (tmp_path / "none").exists()


def test_a_hf_checkpoint_is_named_as_such_with_what_is_expected(hf_dir, run_job):
    """Before: "DIR has no config.json or checkpoints/", though it has a config.json (HF's)."""
    result = run_job("experiments.evaluate", f"--workdir={hf_dir}", "--task=perplexity")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {hf_dir} holds a HF checkpoint (model.safetensors), not a training run: {EXPECTED}; score a HF "
        f"checkpoint with `python -m experiments.lm_eval run --model apertus_jax --model_args pretrained={hf_dir}`"
    ]
    assert not os.path.exists(os.path.join(hf_dir, "eval"))


def write_shards(path, documents, tokenizer) -> str:
    """A shard set of `documents` (demo corpus records) as `experiments.tokenize_data` writes it."""
    with ShardWriter(path, tokenizer, source="german-prose", licence="CC0") as writer:
        for document in documents:
            writer.write(tokenizer.encode_document(document["text"]), document["doc_id"])
    return str(path)


def write_jsonl(path, documents) -> str:
    path.write_text("".join(json.dumps({"text": d["text"]}) + "\n" for d in documents))
    return str(path)


def own_data_config(workdir, shards, heldout_paths=()) -> None:
    """`workdir`'s config.json as a run of `configs/runs/tiny_own_data.py:SHARDS` records it (a run on the
    user's own shards), its model and tokenizer kept."""
    with open(os.path.join(workdir, "config.json")) as f:
        recorded = json.load(f)
    recorded["data"]["pipeline"] = dict(parse(tiny_own_data.get_config(shards)).to_dict()["data"]["pipeline"])
    recorded["eval"]["heldout_paths"] = list(heldout_paths)
    with open(os.path.join(workdir, "config.json"), "w") as f:
        json.dump(recorded, f)


def test_a_run_on_its_own_shards_is_refused_without_held_out_data_in_one_line(tmp_path, run_job):
    """Before the model is read: the run has no checkpoint here, and no eval/ is written."""
    tokenizer = demo_tokenizer(4096)
    shards = write_shards(tmp_path / "shards", load_german_prose()[TRAINED], tokenizer)
    workdir = tmp_path / "run"
    (workdir / "checkpoints").mkdir(parents=True)
    (workdir / "config.json").write_text(json.dumps(parse(tiny_own_data.get_config(shards)).to_dict()))
    other = tmp_path / "other_shards"
    write_shards(other, load_german_prose()[HELDOUT], tokenizer)
    manifest = json.loads((other / MANIFEST).read_text())
    manifest["tokenizer"].update(name="tekken", checksum="0" * 64)
    (other / MANIFEST).write_text(json.dumps(manifest))
    for flags, says in [
        (
            ["--task=perplexity"],
            "the run trains on 'text' (arrayrecord) with no held-out set to score; pass --heldout=PATH: a shard "
            "set of experiments.tokenize_data or a JSONL, Parquet or text file of text the run never trained on",
        ),
        (
            ["--task=memorization"],
            "the run trains on 'text' (arrayrecord) with no held-out set to score; pass",
        ),
        (
            [f"--heldout={tmp_path / 'none.jsonl'}", "--task=perplexity"],
            f"--heldout={tmp_path / 'none.jsonl'} does",
        ),
        (
            [f"--heldout={other}", "--task=perplexity"],
            f"--heldout={other}: tokenized with tekken (sha256 000000000000), the run trained with "
            f"{tokenizer.name} (sha256 {tokenizer.checksum[:12]}); re-tokenize them with experiments.tokenize_data "
            "--tokenizer=demo, or pass their text file (JSONL, Parquet or text) as --heldout",
        ),
        (
            [f"--heldout={other}"],
            "--heldout goes with --task=perplexity or memorization, not --task=german_exams_qa",
        ),
    ]:
        result = run_job("experiments.evaluate", f"--workdir={workdir}", *flags)
        assert result.returncode == 2 and result.stdout == "", result.stderr[-2000:]
        (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert line.startswith(f"error: {says}"), line
    assert sorted(os.listdir(workdir)) == ["checkpoints", "config.json"]
    # Mixed with the demo corpus, the run is not scored on the demo's held-out text alone.
    mixed = tiny_own_data.get_config(shards)
    with mixed.unlocked():
        mixed.data.pipeline.components.prose = dict(kind="demo", sources=["german_prose"], weight=0.5)
    (workdir / "config.json").write_text(json.dumps(parse(mixed).to_dict()))
    result = run_job("experiments.evaluate", f"--workdir={workdir}", "--task=perplexity")
    assert result.returncode == 2 and result.stdout == "", result.stderr[-2000:]
    assert result.stderr.splitlines()[-1].startswith(
        "error: the run trains on 'text' (arrayrecord) with no held-out set to score; pass --heldout=PATH"
    )


@pytest.fixture(scope="module")
def own_data_run(workdir, tmp_path_factory):
    """(workdir, its shard set, its held-out data as a JSONL file and as a shard set): the tiny trained
    workdir as a run on the user's own shards (German prose) records it."""
    root = tmp_path_factory.mktemp("own_data")
    run = str(root / "run")
    shutil.copytree(workdir, run)
    tokenizer = demo_tokenizer(1024)
    shards = write_shards(root / "shards", load_german_prose()[TRAINED], tokenizer)
    own_data_config(run, shards)
    heldout = load_german_prose()[HELDOUT]
    jsonl = write_jsonl(root / "heldout.jsonl", heldout)
    return run, shards, jsonl, write_shards(root / "heldout_shards", heldout, tokenizer)


@pytest.mark.slow
def test_a_run_on_its_own_shards_is_scored_on_its_own_held_out_data(own_data_run, caplog):
    caplog.set_level(logging.INFO)
    run, shards, jsonl, shard_set = own_data_run
    tokenizer = demo_tokenizer(1024)
    texts = [d["text"] for d in load_german_prose()[HELDOUT]]
    scored_tokens = sum(len(tokenizer.encode_document(t)) - 1 for t in texts)  # all but each BoD
    from_file = evaluate(run, "perplexity", heldout=jsonl, batch_size=4)
    assert from_file["data"] == f"--heldout={jsonl} (3 documents)" and "unseen_languages" not in from_file
    assert (from_file["num_documents"], from_file["num_tokens"]) == (3, scored_tokens)
    num_bytes = sum(len(t.encode("utf-8")) for t in texts)
    nll = from_file["nll_per_token"] * scored_tokens
    assert from_file["bits_per_byte"] == pytest.approx(nll / math.log(2) / num_bytes)
    assert f"perplexity: scoring 3 documents of --heldout={jsonl} (3 documents)" in caplog.messages
    # The same documents as shards: the same tokens scored, the same perplexity; no texts, so no bytes.
    from_shards = evaluate(run, "perplexity", heldout=shard_set, batch_size=4)
    assert from_shards["data"] == f"--heldout={shard_set} (a shard set of 3 documents)"
    assert from_shards["perplexity"] == from_file["perplexity"] and from_shards["bits_per_byte"] is None
    # Named in the run's config (eval.heldout_paths), the held-out file is the default.
    own_data_config(run, shards, [f"heldout={jsonl}"])
    by_default = evaluate(run, "perplexity", batch_size=4)
    assert by_default["data"] == "the run's held-out sets: heldout"
    assert (
        "not scored: 'text' (arrayrecord), with no held-out set of its own and no file of it in eval.heldout_paths"
        in caplog.messages
    )
    assert by_default["perplexity"] == from_file["perplexity"]
    memo = evaluate(run, "memorization", limit=2, batch_size=2, prefix_len=8, suffix_len=8)
    assert memo["train"]["data"] == "the run's training components: text (arrayrecord)"
    assert memo["heldout"]["data"] == "the run's held-out sets: heldout"
    assert memo["train"]["num_documents"] == memo["heldout"]["num_documents"] == 2
