r"""Tokenizer fairness report on the UDHR parallel corpus (Apertus Figure 1 on UDHR instead of FLORES+).

Evaluates tekken (the Apertus tokenizer), a SentencePiece BPE trained here on the demo corpus, and any
HF tokenizer.json given, on the 521 UDHR translations vendored with the demo corpus, and writes to --out:
  <tokenizer>.csv / <tokenizer>.md   per-language table (tokens, parity vs English, fertility, ...)
  summary.csv / summary.md           one row per tokenizer (Gini, fertility, compression, utilization)
  tokenizer_fairness.png             per-language cost sorted, one line per tokenizer, Gini in the legend

The demo BPE is trained on the demo corpus's train split, which holds the full UDHR text of 95% of the
translations (plus German prose): on those it is contaminated (it has seen the evaluation text), so its
costs are optimistic. The column `gini_heldout` is computed over the 5% held-out translations only,
which no tokenizer here was trained on (to our knowledge).

  python -m experiments.tokenizer_fairness --out=/tmp/fairness \
      --hf_tokenizer=llama3.1=/tmp/llama/package/models/tokenizer.json
"""

import os
import re
import sys
import time

from absl import app, flags

from apertus_jax.data.demo_corpus import load_demo_documents, load_udhr
from apertus_jax.tokenizers import load_tokenizer
from apertus_jax.tokenizers.hf import HFTokenizer
from apertus_jax.tokenizers.report import LANGUAGE_COLUMNS, TokenizerReport, csv_table, evaluate, \
    markdown_table, plot_costs, write_text
from apertus_jax.tokenizers.train import BPEConfig, train_sentencepiece

OUT = flags.DEFINE_string("out", None, "output folder", required=True)
HF_TOKENIZERS = flags.DEFINE_multi_string(
    "hf_tokenizer", [], "HF tokenizer.json to compare, as PATH or NAME=PATH (repeatable)")
BPE_VOCAB_SIZE = flags.DEFINE_integer(
    "bpe_vocab_size", 32_000, "vocabulary of the SentencePiece BPE trained on the demo corpus "
    "(Boldt's 32k); 0 skips it")
REFERENCE = flags.DEFINE_string("reference_lang", "eng", "UDHR code whose cost is parity 1.0")
LANGUAGES = flags.DEFINE_list("languages", None, "UDHR codes to evaluate (default: all)")

SUMMARY_COLUMNS = ("tokenizer", "vocab_size", "languages", "gini", "gini_heldout", "fertility",
                   "bytes_per_token", "chars_per_token", "vocabulary_utilization", "median_parity",
                   "max_parity", "max_parity_lang")


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


def _summary_row(report: TokenizerReport, heldout: list[str]) -> dict:
    worst = report.rows[-1]
    return {"tokenizer": report.name, "vocab_size": report.vocab_size, "languages": len(report.rows),
            "gini": report.gini, "gini_heldout": report.subset_gini(heldout) if heldout else "",
            "fertility": report.fertility, "bytes_per_token": report.bytes_per_token,
            "chars_per_token": report.chars_per_token,
            "vocabulary_utilization": report.vocabulary_utilization,
            "median_parity": report.rows[len(report.rows) // 2]["parity"],
            "max_parity": worst["parity"], "max_parity_lang": worst["lang"]}


def main(argv):
    del argv
    start = time.time()
    out = OUT.value
    texts = load_udhr()
    if LANGUAGES.value:
        missing = sorted(set(LANGUAGES.value) - set(texts))
        if missing:
            sys.exit(f"unknown UDHR codes {missing}; see apertus_jax.data.demo_corpus.udhr_languages()")
        texts = {code: texts[code] for code in LANGUAGES.value}
    if REFERENCE.value not in texts:
        sys.exit(f"reference language {REFERENCE.value!r} is not among the evaluated UDHR codes")
    heldout = sorted({doc["code"] for doc in load_demo_documents("heldout", ["udhr"])} & set(texts))
    _log(f"UDHR: {len(texts)} translations, {len(heldout)} held out from the demo training split")

    reports = []
    for tokenizer in _tokenizers(out):
        tick = time.time()
        report = evaluate(tokenizer, texts, REFERENCE.value)
        slug = _slug(report.name)
        write_text(os.path.join(out, f"{slug}.csv"), csv_table(LANGUAGE_COLUMNS, report.rows))
        write_text(os.path.join(out, f"{slug}.md"), markdown_table(LANGUAGE_COLUMNS, report.rows))
        reports.append(report)
        _log(f"{report.name}: Gini {report.gini:.4f}, fertility {report.fertility:.3f}, "
             f"{time.time() - tick:.1f} s")

    rows = sorted((_summary_row(r, heldout) for r in reports), key=lambda row: row["gini"])
    write_text(os.path.join(out, "summary.csv"), csv_table(SUMMARY_COLUMNS, rows))
    summary = markdown_table(SUMMARY_COLUMNS, rows)
    write_text(os.path.join(out, "summary.md"), summary)
    plot_costs(reports, os.path.join(out, "tokenizer_fairness.png"),
               f"Tokenization cost on {len(texts)} UDHR translations")
    _log(summary)
    _log(f"lowest Gini: {rows[0]['tokenizer']} ({rows[0]['gini']:.4f}); tekken is "
         f"{'' if rows[0]['tokenizer'] == 'tekken' else 'not '}the lowest of {len(rows)}; "
         f"{time.time() - start:.0f} s; outputs in {out}")


if __name__ == "__main__":
    app.run(main)
