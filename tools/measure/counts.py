"""The counts the docs quote of the shipped data and presets: the demo corpus and its splits
(`tools.measure.demo_corpus`), the presets' parameter counts and tekken's vocabulary
(`tools.measure.param_counts`); each command prints one JSON object.

    values = measure_demo_corpus(REPO, scratch)
"""

from __future__ import annotations

from tools.measure import commands

# docs/usage.md's and docs/data.md's counts of the demo corpus and its splits (`load_demo_documents`).
CORPUS_COUNT = "python -m tools.measure.demo_corpus"
DEMO_CORPUS_VALUES = (
    "udhr_translations",
    "udhr_languages",
    "prose_mb",
    "heldout_udhr_paragraphs",
    "heldout_udhr_translations",
    "heldout_prose_documents",
    "unseen_translations",
)


def measure_demo_corpus(root: str, scratch: str) -> dict:
    """The counts of the vendored demo corpus and its splits, from the JSON their command prints
    (`tools.measure.demo_corpus`: the values and their units).

    Raises:
      ChildProcessError: the command failed. ValueError: it printed no JSON object.
    """
    del scratch  # nothing is written
    return commands.printed_json(CORPUS_COUNT, root, {})


# The parameter counts and tekken's vocabulary size of docs/configs.md and docs/usage.md.
PARAM_COUNT = "python -m tools.measure.param_counts"
PARAM_COUNT_VALUES = ("apertus_8b_params", "apertus_1p5b_params", "tekken_vocab_size")


def measure_param_counts(root: str, scratch: str) -> dict:
    """The parameter counts of the apertus-8b and apertus-1.5b presets and the tekken tokenizer's vocabulary
    size, from the JSON their command prints (`tools.measure.param_counts`).

    Returns:
      apertus_8b_params, apertus_1p5b_params, tekken_vocab_size.

    Raises:
      ChildProcessError: the command failed. ValueError: it printed no JSON object.
    """
    del scratch  # nothing is written
    return commands.printed_json(PARAM_COUNT, root, {})
