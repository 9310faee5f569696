r"""Tokenizer fairness report on the UDHR parallel corpus (Apertus Figure 1 on UDHR instead of FLORES+).

Evaluates tekken (the Apertus tokenizer), a SentencePiece BPE trained here on the demo corpus, and any
HF tokenizer.json given, on the 521 UDHR translations vendored with the demo corpus, and writes to --out:
  <tokenizer>.csv / <tokenizer>.md   per-language table (tokens, parity vs English, fertility, ...)
  summary.csv / summary.md           one row per tokenizer (Gini, fertility, compression, utilization)
  by_script.csv / by_script.md       median cost per dominant script, one column per tokenizer
  tokenizer_fairness.png             per-language cost sorted, one line per tokenizer, Gini in the legend

The demo BPE is trained on the demo corpus's train split, which holds the full UDHR text of 95% of the
translations (plus German prose): on those it is contaminated (it has seen the evaluation text), so its
costs are optimistic. The column `gini_heldout` is computed over the 5% held-out translations only,
which the demo BPE has not seen. `gini` covers all translations (several for some languages, e.g. 7
for Mandarin), `gini_one_per_language` the first translation of each identified ISO 639-3 language,
`gini_latin` / `gini_non_latin` the translations whose dominant script is / is not Latin.

  python -m experiments.tokenizer_fairness --out=/tmp/fairness \
      --hf_tokenizer=llama3.1=/tmp/llama/package/models/tokenizer.json
"""

import collections
import os
import re
import statistics
import time

from absl import flags

from apertus_jax.data.demo_corpus import load_demo_documents, load_udhr, udhr_languages
from apertus_jax.tokenizers import fairness, load_tokenizer
from apertus_jax.tokenizers.hf import HFTokenizer
from apertus_jax.tokenizers.report import (
    LANGUAGE_COLUMNS,
    TokenizerReport,
    csv_table,
    evaluate,
    markdown_table,
    plot_costs,
    write_text,
)
from apertus_jax.tokenizers.scripts import dominant_script
from apertus_jax.tokenizers.train import BPEConfig, train_sentencepiece
from experiments import cli

OUT = flags.DEFINE_string("out", None, "output folder", required=True)
HF_TOKENIZERS = flags.DEFINE_multi_string(
    "hf_tokenizer", [], "HF tokenizer.json to compare, as PATH or NAME=PATH (repeatable)"
)
BPE_VOCAB_SIZE = flags.DEFINE_integer(
    "bpe_vocab_size",
    32_000,
    "vocabulary of the SentencePiece BPE trained on the demo corpus (Boldt's 32k); 0 skips it",
)
REFERENCE = flags.DEFINE_string("reference_lang", "eng", "UDHR code whose cost is parity 1.0")
LANGUAGES = flags.DEFINE_list("languages", None, "UDHR codes to evaluate (default: all)")

SUMMARY_COLUMNS = (
    "tokenizer",
    "vocab_size",
    "translations",
    "gini",
    "gini_one_per_language",
    "gini_heldout",
    "gini_latin",
    "gini_non_latin",
    "fertility",
    "bytes_per_token",
    "chars_per_token",
    "vocabulary_utilization",
    "median_parity",
    "max_parity",
    "max_parity_lang",
)


def _log(message: str) -> None:
    print(message, flush=True)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")


def _tokenizers(out: str):
    """Yields the tokenizers to compare, one at a time (Gemma-3's file alone is 33 MB)."""
    yield load_tokenizer("tekken")
    if BPE_VOCAB_SIZE.value:
        texts = [doc["text"] for doc in load_demo_documents("train")]
        path = os.path.join(out, f"bpe{BPE_VOCAB_SIZE.value // 1000}k_demo.model")
        _log(f"training SentencePiece BPE ({BPE_VOCAB_SIZE.value} ids) on {len(texts)} demo documents")
        yield train_sentencepiece(texts, path, BPEConfig(vocab_size=BPE_VOCAB_SIZE.value))
    for entry in HF_TOKENIZERS.value:
        name, separator, path = entry.partition("=")
        yield HFTokenizer(path, name=name) if separator else HFTokenizer(entry)


def _one_per_language(codes: set[str]) -> list[str]:
    """The first translation (by code) of each identified ISO 639-3 language among `codes`."""
    first = {}
    for language in udhr_languages():  # sorted by code
        if language["code"] in codes and language["iso6393"] != "und":
            first.setdefault(language["iso6393"], language["code"])
    return sorted(first.values())


def _summary_row(report: TokenizerReport, subsets: dict[str, list[str]]) -> dict:
    worst = report.rows[-1]
    return {
        "tokenizer": report.name,
        "vocab_size": report.vocab_size,
        "translations": len(report.rows),
        "gini": report.gini,
        **{f"gini_{name}": report.subset_gini(codes) if codes else "" for name, codes in subsets.items()},
        "fertility": report.fertility,
        "bytes_per_token": report.bytes_per_token,
        "chars_per_token": report.chars_per_token,
        "vocabulary_utilization": report.vocabulary_utilization,
        "median_parity": statistics.median(row["parity"] for row in report.rows),
        "max_parity": worst["parity"],
        "max_parity_lang": worst["lang"],
    }


def _by_script_rows(reports: list[TokenizerReport], script_of: dict[str, str]) -> list[dict]:
    """Per dominant script: number of translations and each tokenizer's median parity."""
    rows = []
    for script, count in sorted(
        collections.Counter(script_of.values()).items(), key=lambda item: (-item[1], item[0])
    ):
        row = {"script": script, "translations": count}
        for report in reports:
            row[report.name] = statistics.median(
                r["parity"] for r in report.rows if script_of[r["lang"]] == script
            )
        rows.append(row)
    return rows


def main(argv):
    del argv
    start = time.time()
    out = OUT.value
    texts = load_udhr()
    if LANGUAGES.value:
        missing = sorted(set(LANGUAGES.value) - set(texts))
        if missing:
            cli.usage_error(
                f"unknown UDHR codes {missing}; see apertus_jax.data.demo_corpus.udhr_languages()"
            )
        texts = {code: texts[code] for code in LANGUAGES.value}
    if REFERENCE.value not in texts:
        cli.usage_error(f"reference language {REFERENCE.value!r} is not among the evaluated UDHR codes")
    script_of = {code: dominant_script(text) for code, text in texts.items()}
    subsets = {
        "one_per_language": _one_per_language(set(texts)),
        "heldout": sorted({doc["code"] for doc in load_demo_documents("heldout", ["udhr"])} & set(texts)),
        "latin": sorted(code for code, script in script_of.items() if script == "Latin"),
        "non_latin": sorted(code for code, script in script_of.items() if script != "Latin"),
    }
    _log(
        f"UDHR: {len(texts)} translations of {len(subsets['one_per_language'])} identified "
        f"languages in {len(set(script_of.values()))} scripts, {len(subsets['heldout'])} held out "
        "from the demo training split"
    )

    reports = []
    for tokenizer in _tokenizers(out):
        tick = time.time()
        report = evaluate(tokenizer, texts, REFERENCE.value)
        slug = _slug(report.name)
        write_text(os.path.join(out, f"{slug}.csv"), csv_table(LANGUAGE_COLUMNS, report.rows))
        write_text(os.path.join(out, f"{slug}.md"), markdown_table(LANGUAGE_COLUMNS, report.rows))
        reports.append(report)
        _log(
            f"{report.name}: Gini {report.gini:.4f}, fertility {report.fertility:.3f}, "
            f"{time.time() - tick:.1f} s"
        )

    rows = sorted((_summary_row(r, subsets) for r in reports), key=lambda row: row["gini"])
    write_text(os.path.join(out, "summary.csv"), csv_table(SUMMARY_COLUMNS, rows))
    # Reference points without a tokenizer: the spread of the translations' lengths themselves.
    baselines = ", ".join(
        f"{unit} {fairness.gini(row[unit] for row in reports[0].rows):.4f}"
        for unit in ("bytes", "chars", "words")
    )
    summary = (
        markdown_table(SUMMARY_COLUMNS, rows)
        + f"\nGini of the texts' lengths in UTF-8 bytes, characters, words: {baselines}\n"
    )
    write_text(os.path.join(out, "summary.md"), summary)
    by_script = _by_script_rows(reports, script_of)
    script_columns = ("script", "translations", *(r.name for r in reports))
    write_text(os.path.join(out, "by_script.csv"), csv_table(script_columns, by_script))
    write_text(os.path.join(out, "by_script.md"), markdown_table(script_columns, by_script))
    plot_costs(
        reports,
        os.path.join(out, "tokenizer_fairness.png"),
        f"Tokenization cost on {len(texts)} UDHR translations",
    )
    _log(summary)
    ranking = [row["tokenizer"] for row in rows]
    _log(
        f"lowest Gini: {ranking[0]} ({rows[0]['gini']:.4f}); tekken ranks "
        f"{ranking.index('tekken') + 1} of {len(rows)}; {time.time() - start:.0f} s; outputs in {out}"
    )


if __name__ == "__main__":
    cli.run_absl(main)
