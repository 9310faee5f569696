"""The two CLIs end to end on small real inputs: experiments.train_tokenizer, tokenizer_fairness."""

import csv
import json
import subprocess
import sys

import tokenizers
from tokenizers import decoders, models, pre_tokenizers, trainers

from apertus_jax.data.demo_corpus import load_udhr
from apertus_jax.tokenizers import load_tokenizer

LANGS = "eng,deu_1996,fra,rus,cmn_hans,jpn,arb,hin,tha,amh"


def _run(*args):
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, check=False, timeout=300
    )


def test_train_tokenizer_cli(tmp_path, udhr_sample):
    (tmp_path / "a.txt").write_text(udhr_sample["eng"] * 3)
    with open(tmp_path / "b.jsonl", "w", encoding="utf-8") as f:
        for lang in ("deu_1996", "rus", "vie"):
            f.write(json.dumps({"text": udhr_sample[lang]}) + "\n")
    result = _run(
        "experiments.train_tokenizer",
        f"--input={tmp_path}/*.*",
        "--vocab_size=500",
        f"--out={tmp_path}/out/bpe.model",
    )
    assert result.returncode == 0, result.stderr
    assert "all: 4 documents" in result.stdout
    tokenizer = load_tokenizer(f"sentencepiece:{tmp_path}/out/bpe.model")
    assert (tokenizer.vocab_size, tokenizer.bod_id, tokenizer.eod_id, tokenizer.pad_id) == (500, 1, 2, 3)

    # Without the suffix, the model still lands at a `.model` path (the one the help and README use).
    result = _run(
        "experiments.train_tokenizer",
        f"--input={tmp_path}/a.txt",
        "--vocab_size=300",
        f"--out={tmp_path}/bare",
    )
    assert result.returncode == 0, result.stderr
    assert f"sentencepiece:{tmp_path}/bare.model" in result.stdout and not (tmp_path / "bare").exists()
    assert load_tokenizer(f"sentencepiece:{tmp_path}/bare.model").vocab_size == 300

    result = _run(
        "experiments.train_tokenizer", f"--input={tmp_path}/missing*.txt", f"--out={tmp_path}/x.model"
    )
    assert result.returncode == 2 and "matches no file" in result.stderr
    assert not (tmp_path / "x.model").exists()


def test_tokenizer_fairness_cli(tmp_path, udhr_sample):
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator(
        [udhr_sample["eng"]],
        trainers.BpeTrainer(
            vocab_size=300, special_tokens=["</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    hf.save(str(tmp_path / "tokenizer.json"))

    out = tmp_path / "report"
    result = _run(
        "experiments.tokenizer_fairness",
        f"--out={out}",
        f"--languages={LANGS}",
        "--bpe_vocab_size=4000",
        f"--hf_tokenizer=toy={tmp_path}/tokenizer.json",
    )
    assert result.returncode == 0, result.stderr
    names = {"tekken", "sentencepiece_bpe4k_demo.model", "toy"}
    assert {p.name for p in out.iterdir()} >= {f"{n}.{e}" for n in names for e in ("csv", "md")} | {
        "summary.csv",
        "summary.md",
        "by_script.csv",
        "by_script.md",
        "tokenizer_fairness.png",
        "bpe4k_demo.model",
    }
    summary = list(csv.DictReader(open(out / "summary.csv", encoding="utf-8")))
    assert [float(row["gini"]) for row in summary] == sorted(float(row["gini"]) for row in summary)
    assert {row["tokenizer"] for row in summary} == {"tekken", "sentencepiece:bpe4k_demo.model", "toy"}
    assert all(row["translations"] == "10" for row in summary)
    assert all(float(row["gini_latin"]) < float(row["gini_non_latin"]) for row in summary)
    by_script = list(csv.DictReader(open(out / "by_script.csv", encoding="utf-8")))
    assert by_script[0]["script"] == "Latin" and by_script[0]["translations"] == "3"
    assert sum(int(row["translations"]) for row in by_script) == 10
    tekken_rows = {row["lang"]: row for row in csv.DictReader(open(out / "tekken.csv", encoding="utf-8"))}
    assert list(tekken_rows) == sorted(tekken_rows, key=lambda lang: int(tekken_rows[lang]["tokens"]))
    english = load_udhr()["eng"]
    assert int(tekken_rows["eng"]["tokens"]) == len(load_tokenizer("tekken").encode(english))
    assert float(tekken_rows["eng"]["parity"]) == 1.0
    assert "lowest Gini" in result.stdout and "tekken ranks" in result.stdout
    assert "UTF-8 bytes, characters, words: bytes 0." in (out / "summary.md").read_text()

    result = _run("experiments.tokenizer_fairness", f"--out={tmp_path}/bad", "--languages=eng,xx")
    assert result.returncode == 2 and "unknown UDHR codes ['xx']" in result.stderr
