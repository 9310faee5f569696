"""Fairness report of tokenizers on a parallel corpus: per-language tables, a summary and a plot.

The cost of a language is the number of tokens of its translation of the same text (UDHR), its parity
the cost relative to the reference language (English); the Gini coefficient over languages summarizes
how unequal the costs are (docs/recipe.md section 9, Apertus Figure 1). Outputs are written atomically.
"""

import csv
import dataclasses
import io
import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from apertus_jax.tokenizers import fairness
from apertus_jax.tokenizers.base import Tokenizer
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


def write_atomic(path: str, write: Callable[[str], None]) -> None:
    """Calls `write(tmp_path)`, then renames tmp_path to `path`: never a half-written `path`."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    base, ext = os.path.splitext(path)
    tmp_path = f"{base}.tmp{ext}"  # keeps the extension: matplotlib picks the format from it
    write(tmp_path)
    os.replace(tmp_path, path)


def write_text(path: str, text: str) -> None:
    """Writes `text` (UTF-8) to `path` atomically."""

    def write(tmp_path):
        with open(tmp_path, "w", encoding="utf-8") as f:
            f.write(text)

    write_atomic(path, write)


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
    write_atomic(path, lambda tmp_path: figure.savefig(tmp_path, format="png"))
