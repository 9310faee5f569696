"""tools.measure.fairness: value names of tokenizers, and the values read from a report as the command writes it."""

import pytest

from apertus_jax.data.demo_corpus import load_demo_documents, load_udhr, udhr_languages
from apertus_jax.tokenizers.report import write_fairness_report
from tools.measure import fairness


def test_tokenizer_value_names():
    assert fairness.tokenizer_value_name("llama3.1") == "llama3_1"
    assert fairness.tokenizer_value_name("sentencepiece:bpe32k_demo.model") == "bpe32k_demo"
    assert fairness.tokenizer_value_name("BPE 32k, demo corpus") == "BPE_32k__demo_corpus"


def test_fairness_values_read_the_report_as_written(tmp_path):
    printed = []
    langs = ["eng", "deu_1996", "rus", "cmn_hans", "065"]  # 065: a UDHR code that looks like a number
    rows = write_fairness_report(
        str(tmp_path),
        load_udhr(),
        udhr_languages(),
        load_demo_documents,
        languages=langs,
        bpe_vocab_size=0,
        log=printed.append,
    )
    values = fairness.fairness_values(str(tmp_path))
    assert values["translations"] == 5 and values["scripts"] == 3
    assert values["latin_translations"] == 3 and values["non_latin_translations"] == 2
    assert values["gini_ranking"] == "tekken" and set(values["tokenizer_seconds"]) == {"tekken"}
    tekken = values["tekken"]
    assert tekken["gini"] == rows[0]["gini"] and tekken["vocab_size"] == rows[0]["vocab_size"]
    assert tekken["max_parity_lang"] == rows[0]["max_parity_lang"] and tekken["translations"] == 5
    assert values["by_script"]["Latin"]["translations"] == 3 and "tekken" in values["by_script"]["Han"]
    assert 0 < values["text_gini"]["chars"] < 1
    cheapest = values["tekken_cheapest"]
    assert list(cheapest) == ["1", "2", "3", "4", "5"] and "065" in {r["lang"] for r in cheapest.values()}
    assert [r["tokens"] for r in cheapest.values()] == sorted(r["tokens"] for r in cheapest.values())
    (logged,) = (line for line in printed if line.startswith("tekken: Gini "))
    assert values["tokenizer_seconds"]["tekken"] == float(logged.rsplit(", ", 1)[1].removesuffix(" s"))
    with pytest.raises(FileNotFoundError):
        fairness.fairness_values(str(tmp_path / "none"))
