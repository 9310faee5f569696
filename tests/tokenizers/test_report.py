"""Fairness report: per-language metrics from real encodings, tables, plot, atomic writes."""

import csv
import io

import pytest

from apertus_jax.tokenizers import fairness, load_tokenizer
from apertus_jax.tokenizers.report import (
    LANGUAGE_COLUMNS,
    csv_table,
    evaluate,
    markdown_table,
    plot_costs,
    write_text,
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
