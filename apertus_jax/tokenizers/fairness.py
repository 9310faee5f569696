"""Tokenizer efficiency and cross-language fairness metrics (docs/recipe.md section 9; Apertus section 2.2, App. I).

All functions are pure and take counts, so they are shared by the report and the tests:
  * fertility = tokens / words (word rule in `apertus_jax.tokenizers.words`),
  * compression ratio = mean over texts of units / tokens (units: UTF-8 bytes or characters),
  * vocabulary utilization = distinct ids used / vocabulary size,
  * parity = a language's cost / the reference language's cost on parallel text,
  * Gini coefficient of per-language costs (0 = every language costs the same).
On a parallel corpus (UDHR) the cost of a language is the number of tokens of its translation; the
Gini coefficient is scale-free, so costs and parities relative to English give the same value.
"""

from collections.abc import Iterable, Mapping, Sequence

import numpy as np


def gini(costs: Iterable[float]) -> float:
    """Gini coefficient of non-negative per-language costs, in [0, 1 - 1/n].

    With costs sorted ascending c_1 <= ... <= c_n (docs/recipe.md section 9):
    `G = (1/n) * (n + 1 - 2 * sum_i (n + 1 - i) * c_i / sum_i c_i)`.
    G([1, 2, 3]) = 0.2222, G([0, 0, 1]) = 0.6667, G of equal costs = 0; the order of the input does not
    matter. All-zero costs (every language free) are perfectly equal: G = 0. One language: G = 0.

    Args:
      costs: one cost per language, any order.

    Raises:
      ValueError: no costs (the coefficient of an empty population is undefined), or a negative or
        non-finite cost.
    """
    c = np.sort(np.asarray(list(costs), dtype=np.float64))
    if c.size == 0:
        raise ValueError("gini() needs at least one cost; got none")
    if not np.all(np.isfinite(c)) or c[0] < 0:
        raise ValueError(
            f"gini() needs finite non-negative costs; got min {c[0]}, "
            f"{int(np.sum(~np.isfinite(c)))} non-finite"
        )
    total = c.sum()
    if total == 0:
        return 0.0
    n = c.size
    weights = np.arange(n, 0, -1)  # n + 1 - i for i = 1..n
    # Equal costs can round to -2e-16.
    return max(0.0, float((n + 1 - 2 * np.dot(weights, c) / total) / n))


def fertility(num_tokens: Sequence[int], num_words: Sequence[int]) -> float:
    """Tokens per word over texts: sum of tokens / sum of words, texts without words skipped.

    Returns NaN when no text has a word (never tokens / 1).
    """
    tokens = np.asarray(num_tokens, dtype=np.float64)
    words = np.asarray(num_words, dtype=np.float64)
    has_words = words > 0
    if not has_words.any():
        return float("nan")
    return float(tokens[has_words].sum() / words[has_words].sum())


def compression_ratio(num_units: Sequence[int], num_tokens: Sequence[int]) -> float:
    """Mean over texts of units / tokens (units: bytes or characters); texts with no tokens skipped.

    Returns NaN when no text has a token.
    """
    units = np.asarray(num_units, dtype=np.float64)
    tokens = np.asarray(num_tokens, dtype=np.float64)
    has_tokens = tokens > 0
    if not has_tokens.any():
        return float("nan")
    return float(np.mean(units[has_tokens] / tokens[has_tokens]))


def vocabulary_utilization(ids: Iterable[Iterable[int]], vocab_size: int) -> float:
    """Distinct ids used by all `ids` sequences / `vocab_size`, in [0, 1]."""
    used = set()
    for sequence in ids:
        used.update(int(i) for i in sequence)
    return len(used) / vocab_size


def parity(costs: Mapping[str, float], reference: str = "eng") -> dict[str, float]:
    """Each language's cost relative to the reference language's (1.0 = as cheap as English).

    Raises:
      ValueError: the reference language is missing or its cost is not positive.
    """
    if reference not in costs:
        raise ValueError(f"reference language {reference!r} is not among the {len(costs)} languages")
    if costs[reference] <= 0:
        raise ValueError(f"reference language {reference!r} has cost {costs[reference]}; need > 0")
    return {lang: cost / costs[reference] for lang, cost in costs.items()}
