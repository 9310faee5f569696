"""Canary exposure (Carlini et al. 2019, "The Secret Sharer", section 4; Apertus App. H.1).

For a canary s[r] with secret r from a space R of possible secrets, the rank of s[r] is its position when
all candidates s[r'] are sorted by the model's log-perplexity (most likely first), and

    exposure = log2 |R| - log2 rank(s[r]).

A model that never saw the canary ranks it about in the middle (exposure ~1 bit); a model that memorized
it ranks it first (exposure log2 |R|). Here R is estimated by the true secret and `n` random candidates
(`apertus_jax.data.memorization.canaries.candidate_secrets`), so |R| = n + 1 and the exposure lies in
`[0, log2(n + 1)]`; Carlini et al. extrapolate beyond the sample with a distribution fit, which this
estimate does not do (it saturates at log2(n + 1)). Ties count against the canary (rank = 1 + number of
candidates at least as likely), so a model that scores every candidate alike gets exposure 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from apertus_jax.data.memorization.canaries import candidate_secrets
from apertus_jax.eval.scoring import continuation_logprobs, make_token_logprobs_fn


def exposure(true_logprob: float, candidate_logprobs: Sequence[float]) -> float:
    """Exposure in bits of a canary whose log-probability is `true_logprob` among `candidate_logprobs`.

    Returns:
      `log2(n + 1) - log2(1 + #{candidates with log-probability >= true_logprob})`, n = len(candidates).

    Raises:
      ValueError: no candidates, or a NaN log-probability.
    """
    candidates = np.asarray(candidate_logprobs, np.float64)
    if candidates.size == 0:
        raise ValueError("exposure needs at least one candidate secret to rank the canary against")
    if math.isnan(true_logprob) or np.isnan(candidates).any():
        raise ValueError("exposure: log-probabilities must not be NaN")
    rank = 1 + int(np.sum(candidates >= true_logprob))
    return math.log2(candidates.size + 1) - math.log2(rank)


def text_logprobs(
    model, tokenizer, texts: Sequence[str], *, seq_len: int, batch_size: int = 64
) -> np.ndarray:
    """`log p(text | BoD)` (natural log, summed over the text's tokens) of each text, float64 `[N]`.

    Args:
      model: an `Apertus` model; tokenizer: its tokenizer; seq_len: row length of the scoring batches (at
        least the longest text + 1 tokens).
    """
    fn = make_token_logprobs_fn(model)
    requests = [([tokenizer.bod_id], tokenizer.encode(text)) for text in texts]
    scores = continuation_logprobs(
        fn, requests, seq_len=seq_len, batch_size=batch_size, pad_id=tokenizer.pad_id
    )
    return np.asarray([float(np.sum(s, dtype=np.float64)) for s in scores])


def canary_exposures(
    model,
    tokenizer,
    canaries: Sequence,
    *,
    num_candidates: int,
    seed: int = 0,
    seq_len: int = 64,
    batch_size: int = 64,
) -> list[float]:
    """Exposure (bits) of each canary (`apertus_jax.data.memorization.canaries.Canary`) under `model`, ranked among
    `num_candidates` random secrets of the same sentence.

    Raises:
      ValueError: num_candidates < 1.
    """

    if num_candidates < 1:
        raise ValueError(f"num_candidates={num_candidates} must be >= 1")
    texts = []
    for canary in canaries:
        texts.append(canary.text)
        texts += [canary.with_secret(s).text for s in candidate_secrets(canary, num_candidates, seed)]
    logprobs = text_logprobs(model, tokenizer, texts, seq_len=seq_len, batch_size=batch_size).reshape(
        len(canaries), num_candidates + 1
    )
    return [exposure(row[0], row[1:]) for row in logprobs]
