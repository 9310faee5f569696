"""experiments.tokenize_data as a CLI: an empty input, or an --out it cannot create, is one line, exit 2,
nothing written (no staging directory left)."""

import json
import os

import pytest

from apertus_jax.data import demo_corpus


@pytest.mark.slow
def test_empty_input_is_one_line_and_nothing_is_written(tmp_path, run_job):
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"text": "   "}\n{"text": ""}\n')
    result = run_job(
        "experiments.tokenize_data",
        f"--input={empty}",
        "--tokenizer=tekken",
        f"--out={tmp_path / 'out'}",
        "--source=s",
        "--licence=l",
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines == [
        f"error: no documents to write from {empty}: the input is empty or every document was removed"
    ]
    assert sorted(os.listdir(tmp_path)) == ["empty.jsonl"]


@pytest.mark.parametrize("output_format, written", [("arrayrecord", "{out}"), ("megatron", "{out}.bin")])
def test_an_out_under_a_file_is_refused_before_the_tokenizer_loads(output_format, written, tmp_path, run_job):
    """Before: the demo BPE loaded and every document tokenized, then `error: [Errno 20] Not a directory:
    '.../text.jsonl/.shards.staging/parts/.00000.tmp-6065'`."""
    text = tmp_path / "text.jsonl"
    text.write_text(json.dumps({"text": demo_corpus.load_german_prose()[0]["text"]}) + "\n", encoding="utf-8")
    out = text / "shards"  # a folder on the way is the input file
    result = run_job(
        "experiments.tokenize_data",
        f"--input={text}",
        "--tokenizer=demo",
        f"--out={out}",
        f"--format={output_format}",
        "--source=s",
        "--licence=l",
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [  # the only line: no tokenizer was loaded
        f"error: --out {written.format(out=out)} cannot be created: {text} is a file, not a directory; pass --out= "
        "a directory you can write (or fix its permissions / mount)"
    ]
    assert sorted(os.listdir(tmp_path)) == ["text.jsonl"]


def test_an_unknown_tokenizer_is_one_line_naming_every_form_before_the_workers_start(tmp_path, run_job):
    """Before: the line, without "demo", came from each tokenizing worker once they had started (12 s)."""
    text = tmp_path / "text.jsonl"
    text.write_text(json.dumps({"text": demo_corpus.load_german_prose()[0]["text"]}) + "\n", encoding="utf-8")
    result = run_job(
        "experiments.tokenize_data",
        f"--input={text}",
        "--tokenizer=dmo",
        f"--out={tmp_path / 'shards'}",
        "--source=s",
        "--licence=l",
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [
        "error: unknown tokenizer spec 'dmo'; use demo, tekken, sentencepiece:PATH or hf:PATH"
    ]
    assert sorted(os.listdir(tmp_path)) == ["text.jsonl"]


def test_a_tokenizer_file_that_is_no_model_is_one_line_and_nothing_is_written(tmp_path, run_job):
    """Before: a 52-line traceback ending in sentencepiece's "could not parse ModelProto", exit 1."""
    text = tmp_path / "text.jsonl"
    text.write_text(json.dumps({"text": demo_corpus.load_german_prose()[0]["text"]}) + "\n", encoding="utf-8")
    result = run_job(
        "experiments.tokenize_data",
        f"--input={text}",
        f"--tokenizer=sentencepiece:{text}",
        f"--out={tmp_path / 'shards'}",
        "--source=s",
        "--licence=l",
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [
        f"error: {text} is not a SentencePiece model file; pass a .model file as sentencepiece:PATH, or train "
        "one with `python -m experiments.train_tokenizer`"
    ]
    assert sorted(os.listdir(tmp_path)) == ["text.jsonl"]
