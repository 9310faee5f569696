"""Memorization: prefix -> generated suffix vs the true suffix (Apertus report; docs/recipe.md sections 3 and 9).

Metrics, on token sequences:
- ROUGE-L: F-measure of the longest common subsequence (LCS), `2 P R / (P + R)` with `P = LCS / len(gen)`,
  `R = LCS / len(ref)` (Lin 2004, beta = 1); 1 for identical sequences, 0 without common tokens.
- LCCS: length of the longest common contiguous substring, in tokens (also reported as a fraction of the
  reference length).
- TTR: type-token ratio of the generation (distinct / total tokens); low values flag degenerate, repetitive
  output that can inflate overlap by chance.

Probes: `probe_injection_plan` assigns probe documents to repetition counts (1..128 in Apertus) and
`inject_probes` builds a training document list with each probe repeated that often.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

import numpy as np

from apertus_jax.models.generate import generate


def _as_array(tokens: Sequence[int]) -> np.ndarray:
    return np.asarray(tokens, dtype=np.int64).reshape(-1)


def lcs_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common (not necessarily contiguous) subsequence of `a` and `b`.

    Row-by-row dynamic programme, O(len(a) len(b)) time, O(len(b)) memory, vectorized over `b`: since a
    row of the LCS table is non-decreasing, `row[j] = max_{j' <= j} max(prev[j'], prev[j'-1] + match[j'])`.
    """
    a, b = _as_array(a), _as_array(b)
    prev = np.zeros(len(b) + 1, np.int64)
    for token in a:
        candidates = prev.copy()
        candidates[1:] = np.maximum(prev[1:], prev[:-1] + (b == token))
        prev = np.maximum.accumulate(candidates)
    return int(prev[-1])


def lccs_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common contiguous substring of `a` and `b` (0 if they share no token)."""
    a, b = _as_array(a), _as_array(b)
    prev = np.zeros(len(b) + 1, np.int64)
    best = 0
    for token in a:
        current = np.zeros_like(prev)
        current[1:] = np.where(b == token, prev[:-1] + 1, 0)
        best = max(best, int(current.max()))
        prev = current
    return best


def rouge_l(reference: Sequence[int], generation: Sequence[int]) -> float:
    """ROUGE-L F-measure (beta = 1) in [0, 1]; 0 if either sequence is empty."""
    lcs = lcs_length(reference, generation)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(generation), lcs / len(reference)
    return 2 * precision * recall / (precision + recall)


def exact_match_length(reference: Sequence[int], generation: Sequence[int]) -> int:
    """Leading tokens of `generation` equal to `reference` (0 if the first differs; the Apertus report's
    "exact match length" of a greedy suffix)."""
    reference, generation = _as_array(reference), _as_array(generation)
    n = min(len(reference), len(generation))
    differ = np.flatnonzero(reference[:n] != generation[:n])
    return int(differ[0]) if differ.size else n


def type_token_ratio(tokens: Sequence[int]) -> float:
    """Distinct tokens / tokens, in (0, 1]; 0 for an empty sequence."""
    tokens = _as_array(tokens)
    return len(np.unique(tokens)) / len(tokens) if len(tokens) else 0.0


@dataclasses.dataclass(frozen=True)
class MemorizationScore:
    """Scores of one generated suffix against the true suffix (lengths in tokens)."""

    rouge_l: float
    lccs: int
    lccs_fraction: float
    ttr: float
    exact_match: bool


def score_generation(reference: Sequence[int], generation: Sequence[int]) -> MemorizationScore:
    """All memorization metrics of `generation` against `reference` (both token id sequences)."""
    lccs = lccs_length(reference, generation)
    return MemorizationScore(
        rouge_l=rouge_l(reference, generation),
        lccs=lccs,
        lccs_fraction=lccs / max(len(reference), 1),
        ttr=type_token_ratio(generation),
        exact_match=bool(
            len(reference) == len(generation) and np.array_equal(_as_array(reference), _as_array(generation))
        ),
    )


def mean_scores(scores: Sequence[MemorizationScore]) -> dict[str, float]:
    """Means over documents: `rouge_l`, `lccs`, `lccs_fraction`, `ttr`, `exact_match` (a fraction)."""
    if not scores:
        raise ValueError("no memorization scores to average")
    return {
        f.name: float(np.mean([getattr(s, f.name) for s in scores]))
        for f in dataclasses.fields(MemorizationScore)
    }


def split_prefix_suffix(
    documents: Sequence[Sequence[int]], prefix_len: int, suffix_len: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """`(prefixes, suffixes)`: tokens `[0, prefix_len)` and `[prefix_len, prefix_len + suffix_len)` of each
    document (documents as the model saw them in training, i.e. starting with BoD).

    Raises:
      ValueError: a document shorter than `prefix_len + suffix_len` (the message says which).
    """
    need = prefix_len + suffix_len
    for i, doc in enumerate(documents):
        if len(doc) < need:
            raise ValueError(
                f"document {i} has {len(doc)} tokens, fewer than prefix {prefix_len} + suffix "
                f"{suffix_len}; use shorter lengths or longer documents"
            )
    return (
        [np.asarray(d[:prefix_len], np.int32) for d in documents],
        [np.asarray(d[prefix_len:need], np.int32) for d in documents],
    )


def memorization_scores(
    model,
    documents: Sequence[Sequence[int]],
    *,
    prefix_len: int,
    suffix_len: int,
    batch_size: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    pad_id: int = 3,
    seed: int = 0,
) -> list[MemorizationScore]:
    """Prompts `model` with each document's prefix, generates `suffix_len` tokens (greedy by default, or
    nucleus sampling with `temperature`/`top_p`; docs/recipe.md 9) and scores them against the true suffix.

    Args:
      model: an `Apertus` model.
      documents: token ids (with BoD) of each document, at least `prefix_len + suffix_len` long.
      prefix_len, suffix_len: prompt and continuation lengths in tokens.
      batch_size: prompts per `generate` call (the last batch is padded by repeating a prompt).
    Returns:
      One `MemorizationScore` per document, in order.
    """
    prefixes, suffixes = split_prefix_suffix(documents, prefix_len, suffix_len)
    scores = []
    for start in range(0, len(prefixes), batch_size):
        batch = prefixes[start : start + batch_size]
        padded = batch + [batch[-1]] * (batch_size - len(batch))  # fixed shapes: one compilation
        generated = generate(
            model,
            padded,
            max_new_tokens=suffix_len,
            temperature=temperature,
            top_p=top_p,
            pad_id=pad_id,
            seed=seed + start,
        )
        scores += [score_generation(ref, gen) for ref, gen in zip(suffixes[start:], generated[: len(batch)])]
    return scores


def probe_injection_plan(
    num_probes: int, repetitions: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128), seed: int = 0
) -> list[int]:
    """Repetition count of each probe: probes are split as evenly as possible over `repetitions`, in a
    seeded random order (so no repetition level is tied to a position in the probe list).

    Raises:
      ValueError: fewer probes than repetition levels, or a repetition count < 1.
    """
    if num_probes < len(repetitions):
        raise ValueError(f"{num_probes} probes cannot cover {len(repetitions)} repetition levels; add probes")
    if min(repetitions) < 1:
        raise ValueError(f"repetition counts must be >= 1, got {list(repetitions)}")
    plan = [repetitions[i % len(repetitions)] for i in range(num_probes)]
    random.Random(seed).shuffle(plan)
    return plan


def inject_probes(documents: Sequence, probes: Sequence, plan: Sequence[int], seed: int = 0) -> list:
    """Training documents with probe i repeated `plan[i]` times, all shuffled together (seeded).

    Returns:
      A new list of `len(documents) + sum(plan)` items (the same objects, not copies).
    """
    if len(probes) != len(plan):
        raise ValueError(f"{len(probes)} probes but a plan for {len(plan)}")
    mixed = list(documents) + [p for p, n in zip(probes, plan) for _ in range(n)]
    random.Random(seed).shuffle(mixed)
    return mixed
