"""Per-language toxicity filtering: remove the top fraction (5%) of each language by classifier score.

Apertus 3.1.3 / docs/recipe.md 7: a per-language percentile, not a global threshold, so a language whose scores
are shifted up loses 5% of its documents like every other language.
"""

from collections.abc import Iterable, Mapping

import numpy as np

TOP_FRACTION = 0.05


def removal_count(n: int, top_fraction: float = TOP_FRACTION) -> int:
    """Documents to remove out of n: round(top_fraction * n), half rounded up."""
    return int(np.floor(top_fraction * n + 0.5))


def language_thresholds(
    scores_by_lang: Mapping[str, Iterable[float]], top_fraction: float = TOP_FRACTION
) -> dict[str, float]:
    """Per language, the score at or above which a document is removed.

    Args:
      scores_by_lang: language -> scores of all its documents (higher = more toxic).
      top_fraction: fraction of each language to remove (0.05).
    Returns:
      language -> threshold t: remove documents with score >= t. With k = removal_count(n), t is the k-th
      highest score (so exactly k are removed unless scores tie at t); t = +inf when k = 0.
    Raises:
      ValueError: top_fraction outside [0, 1].
    """
    if not 0.0 <= top_fraction <= 1.0:
        raise ValueError(f"top_fraction {top_fraction} must be in [0, 1]")
    thresholds = {}
    for lang, scores in scores_by_lang.items():
        ordered = np.sort(np.asarray(list(scores), np.float64))[::-1]
        k = removal_count(len(ordered), top_fraction)
        thresholds[lang] = float(ordered[k - 1]) if k > 0 else float("inf")
    return thresholds


def is_toxic(score: float, lang: str, thresholds: Mapping[str, float]) -> bool:
    """True if the document is in its language's removed top fraction (languages without a threshold: never)."""
    return score >= thresholds.get(lang, float("inf"))
