"""A transparent reward for the tiny QRPO set: word-level ROUGE-L F1 against a reference answer.

Words are the lower-cased `\\w+` runs of the text; the score is `apertus_jax.eval.memorization.rouge_l` (the
F-measure of the longest common subsequence, Lin 2004) over them, in [0, 1]. Real runs take rewards from a
reward model or an LLM judge (Apertus section 4.3); any number per completion works.
"""

import re

from apertus_jax.eval.memorization import rouge_l

_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """The lower-cased `\\w+` words of `text`."""
    return _WORD.findall(text.lower())


def rouge_l_reward(reference: str, text: str) -> float:
    """Word-level ROUGE-L F1 of `text` against `reference` (0 when either has no word)."""
    vocabulary: dict[str, int] = {}
    ids = lambda s: [vocabulary.setdefault(w, len(vocabulary)) for w in words(s)]
    return rouge_l(ids(reference), ids(text))
