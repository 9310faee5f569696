"""Fairness report: per-language metrics from real encodings, tables, plot, atomic writes, the UDHR report."""

import csv
import io
import json

import pytest
import tokenizers
from tokenizers import decoders, models, pre_tokenizers, trainers

from apertus_jax.data.demo_corpus import load_demo_documents, load_udhr, udhr_languages
from apertus_jax.files import write_text
from apertus_jax.tokenizers import fairness, load_tokenizer
from apertus_jax.tokenizers.report import (
    LANGUAGE_COLUMNS,
    SUMMARY_COLUMNS,
    csv_table,
    evaluate,
    markdown_table,
    one_per_language,
    plot_costs,
    write_fairness_report,
)
from apertus_jax.tokenizers.words import count_words

LANGS = ("eng", "deu_1996", "rus", "cmn_hans", "hin", "amh", "mya")


@pytest.fixture(name="report", scope="module")
def fixture_report(udhr_sample):
    return evaluate(load_tokenizer("tekken"), {lang: udhr_sample[lang] for lang in LANGS})


def test_rows_match_direct_computation(report, udhr_sample):
    tekken = load_tokenizer("tekken")
    assert [row["lang"] for row in report.rows] == sorted(
        LANGS, key=lambda lang: len(tekken.encode(udhr_sample[lang]))
    )
    english = len(tekken.encode(udhr_sample["eng"]))
    for row in report.rows:
        text = udhr_sample[row["lang"]]
        tokens = len(tekken.encode(text))
        assert row["tokens"] == tokens
        assert row["parity"] == pytest.approx(tokens / english)
        assert row["words"] == count_words(text)
        assert row["fertility"] == pytest.approx(tokens / count_words(text))
        assert row["bytes_per_token"] == pytest.approx(len(text.encode()) / tokens)
        assert row["chars_per_token"] == pytest.approx(len(text) / tokens)
    assert report.gini == fairness.gini(row["tokens"] for row in report.rows)
    assert report.subset_gini(["eng", "rus"]) == fairness.gini(
        [len(tekken.encode(udhr_sample[lang])) for lang in ("eng", "rus")]
    )
    # Burmese costs more than English with tekken (Petrov et al. 2023's "tokenization premium").
    assert report.rows[-1]["parity"] > 2


def test_single_language_and_errors(udhr_sample):
    tekken = load_tokenizer("tekken")
    single = evaluate(tekken, {"eng": udhr_sample["eng"]})
    assert single.gini == 0.0 and single.rows[0]["parity"] == 1.0
    with pytest.raises(ValueError, match="no texts"):
        evaluate(tekken, {})
    with pytest.raises(ValueError, match="reference language"):
        evaluate(tekken, {"deu": udhr_sample["deu_1996"]})
    empty = evaluate(tekken, {"eng": udhr_sample["eng"], "empty": ""})
    row = next(r for r in empty.rows if r["lang"] == "empty")
    assert row["tokens"] == 0 and row["words"] == 0
    assert row["fertility"] != row["fertility"]  # NaN: skipped, never tokens / 1
    assert empty.fertility == pytest.approx(single.fertility)


def test_tables(report):
    parsed = list(csv.DictReader(io.StringIO(csv_table(LANGUAGE_COLUMNS, report.rows))))
    assert [row["lang"] for row in parsed] == [row["lang"] for row in report.rows]
    assert float(parsed[0]["parity"]) == report.rows[0]["parity"]
    lines = markdown_table(("lang", "parity"), report.rows).splitlines()
    assert lines[0] == "| lang | parity |" and lines[1] == "| --- | --- |"
    assert lines[2] == f"| {report.rows[0]['lang']} | {report.rows[0]['parity']:.4f} |"
    assert len(lines) == 2 + len(LANGS)


def test_plot_and_atomic_write(report, tmp_path):
    path = tmp_path / "figures" / "plot.png"
    plot_costs([report], str(path), "test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    write_text(str(tmp_path / "t.md"), "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures", "t.md"]
    assert [p.name for p in (tmp_path / "figures").iterdir()] == ["plot.png"]


FAIRNESS_LANGS = ["eng", "deu_1996", "fra", "rus", "cmn_hans", "jpn", "arb", "hin", "tha", "amh"]


@pytest.mark.slow
def test_udhr_fairness_report(tmp_path, udhr_sample):
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
    logged = []
    rows = write_fairness_report(
        str(out),
        load_udhr(),
        udhr_languages(),
        load_demo_documents,
        languages=FAIRNESS_LANGS,
        bpe_vocab_size=4000,
        hf_tokenizers=[f"toy={tmp_path}/tokenizer.json"],
        log=logged.append,
    )
    names = {"tekken", "sentencepiece_bpe4k_demo.model", "toy"}
    assert {p.name for p in out.iterdir()} == {f"{n}.{e}" for n in names for e in ("csv", "md")} | {
        "summary.csv",
        "summary.md",
        "by_script.csv",
        "by_script.md",
        "tokenizer_fairness.png",
        "report.json",
        "bpe4k_demo.model",
    }
    summary = list(csv.DictReader(open(out / "summary.csv", encoding="utf-8")))
    assert list(summary[0]) == list(SUMMARY_COLUMNS)
    assert [row["tokenizer"] for row in summary] == [row["tokenizer"] for row in rows]
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
    assert logged[0].startswith("UDHR: 10 translations of 10 identified languages in ")
    assert logged[-1].startswith(
        f"lowest Gini: {rows[0]['tokenizer']} ({rows[0]['gini']:.4f}); tekken ranks "
    )
    assert "UTF-8 bytes, characters, words: bytes 0." in (out / "summary.md").read_text()
    report = json.loads((out / "report.json").read_text())
    assert logged[0].startswith(
        f"UDHR: {report['translations']} translations of {report['languages']} identified languages in "
        f"{report['scripts']} scripts, {report['unseen_translations']} of them held out whole"
    )
    text_gini = ", ".join(f"{unit} {gini:.4f}" for unit, gini in report["text_gini"].items())
    assert f"UTF-8 bytes, characters, words: {text_gini}\n" in (out / "summary.md").read_text()
    assert set(report["tokenizer_seconds"]) == {row["tokenizer"] for row in rows}


def test_udhr_fairness_report_rejects_unknown_codes_before_writing(tmp_path):
    with pytest.raises(ValueError, match=r"unknown UDHR codes \['xx'\]"):
        write_fairness_report(
            str(tmp_path / "bad"), load_udhr(), udhr_languages(), load_demo_documents, languages=["eng", "xx"]
        )
    with pytest.raises(ValueError, match="reference language 'eng'"):
        write_fairness_report(
            str(tmp_path / "bad"), load_udhr(), udhr_languages(), load_demo_documents, languages=["fra"]
        )
    assert not (tmp_path / "bad").exists()


def test_one_per_language_takes_the_first_identified_translation():
    languages = [
        {"code": "cmn_hans", "iso6393": "cmn"},
        {"code": "cmn_hant", "iso6393": "cmn"},
        {"code": "eng", "iso6393": "eng"},
        {"code": "xyz", "iso6393": "und"},
    ]
    assert one_per_language({"cmn_hant", "cmn_hans", "xyz", "eng"}, languages) == ["cmn_hans", "eng"]
    assert one_per_language({"cmn_hant"}, languages) == ["cmn_hant"]
