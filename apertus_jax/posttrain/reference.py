"""The frozen reference model's log-probabilities of the training completions: cached once, or on the fly.

Cached (the default, `posttrain.reference = "cached"`): `write_cache` scores every candidate completion of
the preference files once with the reference parameters (one completion per row, slot 0) and writes
`{"fingerprint", "reference_workdir", "reference_step", "logprobs": [...]}` as JSON (atomically); training then
reads the numbers (`cached_reference`) and the reference model is never held in memory. On the fly
(`"on_the_fly"`): the reference scores every batch as it is produced (`on_the_fly_reference`).
The two agree to float32 rounding (tests/posttrain/test_reference.py).
"""

import json
import os
from collections.abc import Callable, Sequence

import jax
import numpy as np

from apertus_jax import files
from apertus_jax.posttrain import rows
from apertus_jax.posttrain.epochs import inputs_fingerprint
from apertus_jax.posttrain.objectives import SLOTS, slot_logprobs
from apertus_jax.tokenizers.base import Tokenizer


class ReferenceModel:
    """`score(batch) -> float32 [B, 2]`: the summed log-probabilities of each slot's completion under
    `apply_fn(params, ...)` (the parameters are not trained)."""

    def __init__(self, apply_fn: Callable, params):
        self.params = params

        def score(p, batch):
            logits = apply_fn(p, batch["tokens"], batch["positions"], batch["segment_ids"])
            return slot_logprobs(logits, batch)[0]

        self._score = jax.jit(score)

    def score(self, batch: dict[str, np.ndarray], params=None) -> np.ndarray:
        """float32 `[B, 2]` for the batch's trainer arrays, under `params` (default: the reference's)."""
        keys = ("tokens", "targets", "positions", "segment_ids", "loss_mask")
        params = self.params if params is None else params
        return np.asarray(jax.device_get(self._score(params, {k: batch[k] for k in keys})), np.float32)


def score_examples(
    model: ReferenceModel, examples: Sequence[dict], seq_len: int, pad_id: int, rows_per_call: int = 8
) -> np.ndarray:
    """log pi_ref of every example's completion (`preference_data.completion_examples`), float32 [N]."""
    values = []
    for start in range(0, len(examples), rows_per_call):
        chunk = [
            rows.pack_row([(e["ids"], e["trained"])], seq_len, pad_id)
            for e in examples[start : start + rows_per_call]
        ]
        chunk += [chunk[-1]] * (rows_per_call - len(chunk))  # one compiled shape
        values.append(model.score(rows.stack_rows(chunk))[:, 0])
    return np.concatenate(values)[: len(examples)]


def cache_fingerprint(paths: Sequence[str], tokenizer: Tokenizer, seq_len: int) -> str:
    """What the cached numbers depend on besides the reference: the files, the tokenizer, seq_len."""
    return inputs_fingerprint(paths, tokenizer, "reference_logprobs", seq_len)


def write_cache(
    path: str, logprobs: np.ndarray, fingerprint: str, reference_workdir: str, reference_step: int
) -> None:
    """Writes the cache JSON atomically (float32 values written exactly)."""
    payload = {
        "fingerprint": fingerprint,
        "reference_workdir": reference_workdir,
        "reference_step": int(reference_step),
        "logprobs": [float(v) for v in np.asarray(logprobs, np.float32)],
    }
    files.write_json(path, payload)


def read_cache(path: str, fingerprint: str, expected: int) -> dict:
    """The cache JSON at `path`, checked against the inputs.

    Raises:
      FileNotFoundError: no cache (write it with `python -m experiments.qrpo`, which scores the reference).
      ValueError: a cache of other inputs or another number of completions.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"no reference log-prob cache at {path}; `python -m experiments.qrpo` writes it, or set "
            "posttrain.reference=on_the_fly"
        )
    with open(path) as f:
        cache = json.load(f)
    if cache.get("fingerprint") != fingerprint or len(cache.get("logprobs", [])) != expected:
        raise ValueError(
            f"reference log-prob cache {path} was computed for other preference files, tokenizer or seq_len; "
            "delete it to recompute"
        )
    return cache


def cached_reference(logprobs: np.ndarray) -> Callable:
    """`(batch, groups) -> float32 [B, 2]` from per-example cached values (empty slots 0)."""
    logprobs = np.asarray(logprobs, np.float32)

    def reference(batch, groups):
        out = np.zeros((len(groups), SLOTS), np.float32)
        for row, group in enumerate(groups):
            out[row, : len(group)] = logprobs[list(group)]
        return out

    return reference


def on_the_fly_reference(model: ReferenceModel) -> Callable:
    """`(batch, groups) -> float32 [B, 2]` scored by the reference model on the batch itself."""
    return lambda batch, groups: model.score(batch)
