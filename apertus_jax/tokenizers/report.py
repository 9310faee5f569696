"""Fairness report of tokenizers on a parallel corpus: per-language tables, a summary and a plot.

The cost of a language is the number of tokens of its translation of the same text (UDHR), its parity
the cost relative to the reference language (English); the Gini coefficient over languages summarizes
how unequal the costs are (docs/recipe.md section 9, Apertus Figure 1). Outputs are written atomically
(`apertus_jax.files`). `write_fairness_report` is the whole UDHR report of
`python -m experiments.tokenizer_fairness` (docs/tokenizer_fairness.md).
"""

import collections
import csv
import dataclasses
import io
import os
import re
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from apertus_jax.files import atomic_path, write_json, write_text
from apertus_jax.tokenizers import fairness
from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.tokenizers.hf import HFTokenizer
from apertus_jax.tokenizers.load import load_tokenizer
from apertus_jax.tokenizers.scripts import dominant_script
from apertus_jax.tokenizers.train import RESERVED_PIECES, BPEConfig, DemoDocuments, train_sentencepiece
from apertus_jax.tokenizers.words import count_words

LANGUAGE_COLUMNS = (
    "lang",
    "tokens",
    "parity",
    "words",
    "fertility",
    "bytes",
    "chars",
    "bytes_per_token",
    "chars_per_token",
    "distinct_ids",
)
SUMMARY_COLUMNS = (
    "tokenizer",
    "vocab_size",
    "translations",
    "gini",
    "gini_one_per_language",
    "gini_unseen_languages",
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
# A Gini over fewer translations is not defined (one cost is "perfectly fair" by arithmetic alone): its
# summary cell is blank and summary.md says why.
MIN_GINI_TRANSLATIONS = 2


@dataclasses.dataclass(frozen=True)
class TokenizerReport:
    """Metrics of one tokenizer on a parallel corpus.

    Attributes:
      name: the tokenizer's name.
      vocab_size: its number of ids.
      rows: one dict per language with LANGUAGE_COLUMNS, sorted by ascending cost (tokens).
      gini: Gini coefficient of the per-language token counts.
      fertility: tokens / words over all languages (texts without words skipped).
      bytes_per_token, chars_per_token: compression ratios (mean over languages of units / tokens).
      vocabulary_utilization: distinct ids over all languages / vocab_size.
    """

    name: str
    vocab_size: int
    rows: tuple[dict, ...]
    gini: float
    fertility: float
    bytes_per_token: float
    chars_per_token: float
    vocabulary_utilization: float

    def subset_gini(self, langs: Sequence[str]) -> float:
        """Gini over the costs of `langs` only (e.g. languages unseen by a trained tokenizer)."""
        wanted = set(langs)
        return fairness.gini(row["tokens"] for row in self.rows if row["lang"] in wanted)


def evaluate(tokenizer: Tokenizer, texts: Mapping[str, str], reference: str = "eng") -> TokenizerReport:
    """Encodes every language's text and computes the per-language and corpus metrics.

    Args:
      tokenizer: any `Tokenizer`.
      texts: language code -> text of the parallel corpus.
      reference: language whose cost defines parity 1.0.

    Raises:
      ValueError: `texts` is empty, or the reference language is missing or encodes to no tokens.
    """
    if not texts:
        raise ValueError("no texts to evaluate the tokenizer on")
    langs = list(texts)
    ids = tokenizer.encode_batch([texts[lang] for lang in langs])
    tokens = {lang: len(lang_ids) for lang, lang_ids in zip(langs, ids)}
    parity = fairness.parity(tokens, reference)
    rows = []
    for lang, lang_ids in zip(langs, ids):
        text = texts[lang]
        num_words, num_bytes, num_chars = count_words(text), len(text.encode("utf-8")), len(text)
        rows.append(
            {
                "lang": lang,
                "tokens": tokens[lang],
                "parity": parity[lang],
                "words": num_words,
                "fertility": fairness.fertility([tokens[lang]], [num_words]),
                "bytes": num_bytes,
                "chars": num_chars,
                "bytes_per_token": fairness.compression_ratio([num_bytes], [tokens[lang]]),
                "chars_per_token": fairness.compression_ratio([num_chars], [tokens[lang]]),
                "distinct_ids": len(set(lang_ids)),
            }
        )
    rows.sort(key=lambda row: (row["tokens"], row["lang"]))
    column = {key: [row[key] for row in rows] for key in ("tokens", "words", "bytes", "chars")}
    return TokenizerReport(
        name=tokenizer.name,
        vocab_size=tokenizer.vocab_size,
        rows=tuple(rows),
        gini=fairness.gini(column["tokens"]),
        fertility=fairness.fertility(column["tokens"], column["words"]),
        bytes_per_token=fairness.compression_ratio(column["bytes"], column["tokens"]),
        chars_per_token=fairness.compression_ratio(column["chars"], column["tokens"]),
        vocabulary_utilization=fairness.vocabulary_utilization(ids, tokenizer.vocab_size),
    )


def _format(value) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def markdown_table(columns: Sequence[str], rows: Sequence[Mapping]) -> str:
    """A GitHub Markdown table; floats with 4 decimals."""
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(_format(row[c]) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def csv_table(columns: Sequence[str], rows: Sequence[Mapping]) -> str:
    """CSV text with a header row; floats with full precision."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def plot_costs(reports: Sequence[TokenizerReport], path: str, title: str) -> None:
    """PNG: each tokenizer's per-language parity, sorted ascending, log scale, Gini in the legend."""
    figure = Figure(figsize=(9, 5.5), dpi=120)  # no pyplot: no global backend state
    axes = figure.subplots()
    for report in sorted(reports, key=lambda r: r.gini):
        parity = np.array([row["parity"] for row in report.rows])
        axes.plot(
            np.arange(1, parity.size + 1),
            parity,
            linewidth=1.6,
            label=f"{report.name} (Gini {report.gini:.3f})",
        )
    axes.axhline(1.0, color="gray", linewidth=0.8, linestyle="--")
    axes.set_yscale("log")
    axes.set_xlabel("translations (languages), sorted by cost")
    axes.set_ylabel("cost relative to English (tokens / English tokens)")
    axes.set_title(title)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(loc="upper left")
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")


def _hf_tokenizer(entry: str) -> HFTokenizer:
    """The HF tokenizer of a `--hf_tokenizer` entry, PATH or NAME=PATH."""
    name, separator, path = entry.partition("=")
    return HFTokenizer(path, name=name) if separator else HFTokenizer(entry)


def check_tokenizer_inputs(bpe_vocab_size: int, hf_tokenizers: Sequence[str]) -> None:
    """Checks the tokenizers of a report before anything is trained or written: each HF file is loaded here
    once (and dropped: the report loads them again one at a time, Gemma-3's file alone is 33 MB).

    Raises:
      ValueError: one line naming the flag (`--bpe_vocab_size`, `--hf_tokenizer`), the problem and the fix.
    """
    if bpe_vocab_size < 0 or 0 < bpe_vocab_size <= RESERVED_PIECES:
        raise ValueError(
            f"--bpe_vocab_size={bpe_vocab_size}: the demo BPE needs more than {RESERVED_PIECES} ids (its special "
            "and byte-fallback pieces), e.g. 32000; 0 skips it"
        )
    for entry in hf_tokenizers:
        try:
            _hf_tokenizer(entry)
        except (ValueError, OSError) as error:
            raise ValueError(f"--hf_tokenizer={entry}: {error}") from None


def _compared_tokenizers(
    out: str,
    bpe_vocab_size: int,
    hf_tokenizers: Sequence[str],
    demo_documents: DemoDocuments,
    log: Callable[[str], None],
) -> Iterator[Tokenizer]:
    """Yields the tokenizers to compare, one at a time (Gemma-3's file alone is 33 MB)."""
    yield load_tokenizer("tekken")
    if bpe_vocab_size:
        texts = [doc["text"] for doc in demo_documents("train", None)]
        path = os.path.join(out, f"bpe{bpe_vocab_size // 1000}k_demo.model")
        log(f"training SentencePiece BPE ({bpe_vocab_size} ids) on {len(texts)} demo documents")
        try:
            yield train_sentencepiece(texts, path, BPEConfig(vocab_size=bpe_vocab_size))
        except ValueError as error:  # e.g. fewer ids than the corpus has characters
            raise ValueError(f"--bpe_vocab_size={bpe_vocab_size}: {error}") from None
    for entry in hf_tokenizers:
        yield _hf_tokenizer(entry)


def one_per_language(codes: Iterable[str], languages: Iterable[Mapping]) -> list[str]:
    """The first translation (by code) of each identified ISO 639-3 language among `codes`.

    Args:
      codes: UDHR translation codes.
      languages: translation metadata with `code` and `iso6393` ("und": not identified), sorted by code
        (`apertus_jax.data.demo_corpus.udhr_languages()`).
    """
    codes, first = set(codes), {}
    for language in languages:
        if language["code"] in codes and language["iso6393"] != "und":
            first.setdefault(language["iso6393"], language["code"])
    return sorted(first.values())


def summary_row(report: TokenizerReport, subsets: Mapping[str, Sequence[str]]) -> dict:
    """One row of SUMMARY_COLUMNS; `subsets` {name: language codes} gives the `gini_<name>` columns ("", not
    defined, for a subset of fewer than MIN_GINI_TRANSLATIONS translations)."""
    worst = report.rows[-1]
    return {
        "tokenizer": report.name,
        "vocab_size": report.vocab_size,
        "translations": len(report.rows),
        "gini": report.gini,
        **{
            f"gini_{name}": report.subset_gini(codes) if len(codes) >= MIN_GINI_TRANSLATIONS else ""
            for name, codes in subsets.items()
        },
        "fertility": report.fertility,
        "bytes_per_token": report.bytes_per_token,
        "chars_per_token": report.chars_per_token,
        "vocabulary_utilization": report.vocabulary_utilization,
        "median_parity": statistics.median(row["parity"] for row in report.rows),
        "max_parity": worst["parity"],
        "max_parity_lang": worst["lang"],
    }


def by_script_rows(reports: Sequence[TokenizerReport], script_of: Mapping[str, str]) -> list[dict]:
    """Per dominant script (most translations first): number of translations and each tokenizer's median
    parity over them."""
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


def write_fairness_report(
    out: str,
    udhr: Mapping[str, str],
    udhr_languages: Sequence[Mapping],
    demo_documents: DemoDocuments,
    *,
    languages: Sequence[str] | None = None,
    reference: str = "eng",
    bpe_vocab_size: int = 32_000,
    hf_tokenizers: Sequence[str] = (),
    log: Callable[[str], None] = print,
) -> list[dict]:
    """The UDHR fairness report of tekken, a demo-trained SentencePiece BPE and HF tokenizers, into `out`.

    Writes `<tokenizer>.csv/.md` (per-language rows of LANGUAGE_COLUMNS), `summary.csv/.md` (one row per
    tokenizer, sorted by Gini; the .md adds the Gini of the texts' lengths in bytes, characters and words),
    `by_script.csv/.md` (median parity per dominant script), `tokenizer_fairness.png` and `report.json`
    ({translations, languages (identified), scripts (dominant), unseen_translations (held out whole),
    text_gini {bytes, chars, words} (the Gini of the texts' lengths), tokenizer_seconds {tokenizer name:
    seconds of its evaluation}}: the figures the log and summary.md print); the BPE model is
    trained into `out/bpe<N>k_demo.model`. The subset columns: `gini_one_per_language` (first translation of
    each identified language), `gini_unseen_languages` (the demo corpus's UDHR translations held out whole: languages
    the demo BPE has not seen), `gini_latin` / `gini_non_latin` (dominant script); a subset of fewer than
    MIN_GINI_TRANSLATIONS translations has a blank cell, and summary.md says so. Nothing is written before
    every tokenizer is evaluated: the tokenizer inputs are checked first (`check_tokenizer_inputs`) and the
    tables are written at the end.

    Args:
      out: the output folder (created if missing).
      udhr: UDHR code -> text (`apertus_jax.data.demo_corpus.load_udhr()`).
      udhr_languages: metadata of the translations (`udhr_languages()`), for `one_per_language`.
      demo_documents: the demo corpus loader (`DemoDocuments`): the unseen-language UDHR codes and the BPE's
        training text.
      languages: UDHR codes to evaluate (None: all).
      reference: UDHR code whose cost is parity 1.0.
      bpe_vocab_size: ids of the demo-trained BPE; 0 skips it.
      hf_tokenizers: HF `tokenizer.json` files as PATH or NAME=PATH.
      log: receives progress lines and the ranking (summary.md holds the table).

    Returns:
      The summary rows (SUMMARY_COLUMNS), sorted by ascending Gini.

    Raises:
      ValueError: an unknown UDHR code, a reference outside the evaluated codes, a BPE vocabulary size below
        RESERVED_PIECES, a missing or unusable HF tokenizer file (all before anything is written; naming the
        flag of `python -m experiments.tokenizer_fairness`), a BPE vocabulary SentencePiece cannot train.
    """
    start = time.time()
    texts = dict(udhr)
    if languages:
        missing = sorted(set(languages) - set(texts))
        if missing:
            raise ValueError(
                f"unknown UDHR codes {missing}; see apertus_jax.data.demo_corpus.udhr_languages()"
            )
        texts = {code: texts[code] for code in languages}
    if reference not in texts:
        raise ValueError(f"reference language {reference!r} is not among the evaluated UDHR codes")
    check_tokenizer_inputs(bpe_vocab_size, hf_tokenizers)
    script_of = {code: dominant_script(text) for code, text in texts.items()}
    subsets = {
        "one_per_language": one_per_language(texts, udhr_languages),
        "unseen_languages": sorted(
            {doc["code"] for doc in demo_documents("unseen_languages", ["udhr"])} & set(texts)
        ),
        "latin": sorted(code for code, script in script_of.items() if script == "Latin"),
        "non_latin": sorted(code for code, script in script_of.items() if script != "Latin"),
    }
    counts = {
        "translations": len(texts),
        "languages": len(subsets["one_per_language"]),
        "scripts": len(set(script_of.values())),
        "unseen_translations": len(subsets["unseen_languages"]),
    }
    log(
        f"UDHR: {counts['translations']} translations of {counts['languages']} identified languages in "
        f"{counts['scripts']} scripts, {counts['unseen_translations']} of them held out whole from the demo "
        "training split"
    )

    reports, seconds_of = [], {}
    for tokenizer in _compared_tokenizers(out, bpe_vocab_size, hf_tokenizers, demo_documents, log):
        tick = time.time()
        report = evaluate(tokenizer, texts, reference)
        reports.append(report)
        seconds_of[report.name] = time.time() - tick
        log(
            f"{report.name}: Gini {report.gini:.4f}, fertility {report.fertility:.3f}, "
            f"{seconds_of[report.name]:.1f} s"
        )

    for report in reports:
        slug = _slug(report.name)
        write_text(os.path.join(out, f"{slug}.csv"), csv_table(LANGUAGE_COLUMNS, report.rows))
        write_text(os.path.join(out, f"{slug}.md"), markdown_table(LANGUAGE_COLUMNS, report.rows))
    rows = sorted((summary_row(r, subsets) for r in reports), key=lambda row: row["gini"])
    write_text(os.path.join(out, "summary.csv"), csv_table(SUMMARY_COLUMNS, rows))
    # Reference points without a tokenizer: the spread of the translations' lengths themselves.
    text_gini = {
        unit: float(fairness.gini(row[unit] for row in reports[0].rows))
        for unit in ("bytes", "chars", "words")
    }
    baselines = ", ".join(f"{unit} {gini:.4f}" for unit, gini in text_gini.items())
    undefined = "".join(
        f"gini_{name} is blank: it covers {len(codes)} of the evaluated translations, a Gini needs "
        f"{MIN_GINI_TRANSLATIONS} or more\n"
        for name, codes in subsets.items()
        if len(codes) < MIN_GINI_TRANSLATIONS
    )
    summary = (
        markdown_table(SUMMARY_COLUMNS, rows)
        + f"\nGini of the texts' lengths in UTF-8 bytes, characters, words: {baselines}\n"
        + undefined
    )
    write_text(os.path.join(out, "summary.md"), summary)
    write_json(
        os.path.join(out, "report.json"),
        {**counts, "text_gini": text_gini, "tokenizer_seconds": seconds_of},
        indent=1,
    )
    by_script = by_script_rows(reports, script_of)
    script_columns = ("script", "translations", *(r.name for r in reports))
    write_text(os.path.join(out, "by_script.csv"), csv_table(script_columns, by_script))
    write_text(os.path.join(out, "by_script.md"), markdown_table(script_columns, by_script))
    plot_costs(
        reports,
        os.path.join(out, "tokenizer_fairness.png"),
        f"Tokenization cost on {len(texts)} UDHR translations",
    )
    ranking = [row["tokenizer"] for row in rows]
    log(
        f"lowest Gini: {ranking[0]} ({rows[0]['gini']:.4f}); tekken ranks "
        f"{ranking.index('tekken') + 1} of {len(rows)}; {time.time() - start:.0f} s; outputs in {out}"
    )
    return rows
