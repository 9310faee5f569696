"""Distillation from stored teacher logits (Apertus Mini; docs/recipe.md section 13): the store, the batch
source that reads it, and the objective.

    source = TeacherLogits(pipeline_batch_source(run), logits_dir, read_meta(logits_dir))
    objective = distillation(seq_len, k, alpha=0.9, temperature=1.0)

The store (`apertus_jax.jobs.distill.write_teacher_logits` writes it): per step, the teacher's `k` most likely
next tokens and their log-probabilities at every position, with the log of the remaining probability mass, in
`logits_dir/step_NNNNNNNN.safetensors` (`step_file`), and `meta.json`. Each step's file carries a checksum of
its tokens (`tokens_checksum`), so a misaligned store fails loudly instead of teaching the wrong rows.

The objective (`distillation`), per unmasked position, with teacher top-k log-probabilities `l_1..l_k` (ids
`j_i`) and the log of the rest of its mass `r = log(1 - sum_i exp(l_i))`, student logits `z`, temperature `tau`:

    p = softmax(l_1 / tau, ..., l_k / tau, r / tau)          # the teacher over its top k and "the rest"
    q_i = softmax(z / tau)[j_i],  q_rest = 1 - sum_i q_i      # the student over the same k + 1 outcomes
    KL  = sum_{i <= k + 1} p_i * (log p_i - log q_i)
    loss = alpha * tau^2 * KL + (1 - alpha) * CE(z, target)

The KL is between both distributions coarsened to the teacher's top k plus one outcome for every other id:
exact at tau = 1 (a lower bound of the full KL), it keeps the student's mass outside the top k where the
teacher has it. (Renormalizing the teacher over its top k instead tells the student that the rest is
impossible: with the demo teacher, whose true next token is often outside its top 32, the distilled student's
held-out loss ended above the from-scratch student's.) At tau != 1 the rest is tempered as one outcome of
log-probability r, an approximation: its ids' own logits are not stored. `tau^2` keeps the gradient scale of
the KL term independent of the temperature (Hinton et al. 2015). The step reports `kl` and `ce` per token
beside the loss. One process: the store holds the rows of a single-process run.
"""

from __future__ import annotations

import hashlib
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from safetensors.numpy import load_file

from apertus_jax.train.batches import BatchSource
from apertus_jax.train.step import Objective

META = "meta.json"
ARRAYS = ("teacher_ids", "teacher_logprobs", "rest_logprob")
LOG_FLOOR = -100.0  # the log-probability a student probability that underflows counts as (exp(-100))


def step_file(logits_dir: str, step: int) -> str:
    """The store's file of step `step` (1-based)."""
    return os.path.join(logits_dir, f"step_{step:08d}.safetensors")


def tokens_checksum(tokens: np.ndarray) -> np.ndarray:
    """sha256 of int32 `[rows, T]` tokens as 32 uint8: what a step file stores to prove its rows."""
    return np.frombuffer(hashlib.sha256(np.ascontiguousarray(tokens, np.int32).tobytes()).digest(), np.uint8)


def read_meta(logits_dir: str) -> dict:
    """The store's `meta.json`.

    Raises:
      FileNotFoundError: `logits_dir` holds no finished store.
    """
    path = os.path.join(logits_dir, META)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{logits_dir} holds no teacher logits (no {META}); write them first with "
            "`python -m experiments.teacher_logits`"
        )
    with open(path) as f:
        return json.load(f)


class TeacherLogits:
    """A batch source (`apertus_jax.train.batches.BatchSource`): `inner`'s batches with the stored teacher
    arrays of the same step attached (`teacher_ids` int32 and `teacher_logprobs` float32, `[rows, T, k]`).

    Raises (from `__next__`):
      ValueError: the store ends before this step, or its rows are not this step's (token checksum).
    """

    def __init__(self, inner: BatchSource, logits_dir: str, meta: dict):
        self.inner, self.logits_dir, self.step = inner, logits_dir, 0
        self.k = meta["k"]

    def __iter__(self) -> TeacherLogits:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        batch = next(self.inner)
        self.step += 1
        path = step_file(self.logits_dir, self.step)
        if not os.path.isfile(path):
            raise ValueError(
                f"{self.logits_dir} has no teacher logits for step {self.step}; write at least train.steps steps"
            )
        stored = load_file(path)
        if not np.array_equal(stored["tokens_sha256"], tokens_checksum(batch["tokens"])):
            raise ValueError(
                f"the teacher logits of step {self.step} in {self.logits_dir} are of other rows; write them with "
                "the student's config (same data, seed and batch plan)"
            )
        expected = (*batch["tokens"].shape, self.k)
        if any(stored[name].shape != expected for name in ARRAYS[:2]):
            raise ValueError(
                f"the teacher logits of step {self.step} in {self.logits_dir} have shape "
                f"{stored['teacher_ids'].shape}, the step needs {expected}; write them with the student's config"
            )
        return {**batch, **{name: stored[name] for name in ARRAYS}}

    def batch_metrics(self, batch: dict) -> dict[str, float]:
        metrics = getattr(self.inner, "batch_metrics", None)
        return metrics(batch) if metrics else {}

    def get_state(self) -> dict:
        return {"inner": self.inner.get_state(), "step": self.step}

    def set_state(self, state: dict) -> None:
        self.inner.set_state(state["inner"])
        self.step = state["step"]

    def consumed(self) -> dict:
        return self.inner.consumed()


def distillation(seq_len: int, k: int, alpha: float, temperature: float) -> Objective:
    """The objective `alpha * tau^2 * KL(teacher top-k || student) + (1 - alpha) * CE` (module docstring) over
    `[B, seq_len, k]` teacher arrays; it reads the logits.

    Raises:
      ValueError: alpha outside [0, 1] or temperature <= 0.
    """
    if not 0.0 <= alpha <= 1.0 or temperature <= 0:
        raise ValueError(f"alpha={alpha} must be in [0, 1] and temperature={temperature} > 0")

    def loss_fn(logits_BxTxV, batch, frozen):
        del frozen
        mask_BxT = batch["loss_mask"].astype(jnp.float32)
        ids_BxTxK = batch["teacher_ids"]
        # The teacher over its top k and the rest, tempered: [B, T, k + 1] probabilities.
        teacher_BxTxK1 = jnp.concatenate([batch["teacher_logprobs"], batch["rest_logprob"][..., None]], -1)
        p_BxTxK1 = jax.nn.softmax(teacher_BxTxK1 / temperature, -1)
        # The student over the same k ids and the rest of the vocabulary, exactly.
        logq_BxTxV = jax.nn.log_softmax(logits_BxTxV / temperature, -1)
        top_BxTxV = jnp.put_along_axis(jnp.zeros(logq_BxTxV.shape, bool), ids_BxTxK, True, -1, inplace=False)
        rest_BxT = jax.nn.logsumexp(jnp.where(top_BxTxV, -jnp.inf, logq_BxTxV), -1)
        logq_BxTxK1 = jnp.concatenate(
            [jnp.take_along_axis(logq_BxTxV, ids_BxTxK, -1), rest_BxT[..., None]], -1
        )
        # 0 log 0 = 0; a student probability that underflows counts as exp(-100)
        logp_BxTxK1 = jnp.log(jnp.maximum(p_BxTxK1, 1e-30))
        terms_BxTxK1 = p_BxTxK1 * (logp_BxTxK1 - jnp.maximum(logq_BxTxK1, LOG_FLOOR))
        kl_BxT = jnp.sum(jnp.where(p_BxTxK1 > 0, terms_BxTxK1, 0.0), -1)
        log_softmax_BxTxV = jax.nn.log_softmax(logits_BxTxV, -1)
        ce_BxT = -jnp.take_along_axis(log_softmax_BxTxV, batch["targets"][..., None], -1)[..., 0]
        loss_BxT = alpha * temperature**2 * kl_BxT + (1 - alpha) * ce_BxT
        sums = {
            "count": jnp.sum(mask_BxT),
            "kl": jnp.sum(kl_BxT * mask_BxT),
            "ce": jnp.sum(ce_BxT * mask_BxT),
        }
        return jnp.sum(loss_BxT * mask_BxT), sums

    arrays = {"teacher_ids": ((seq_len, k), "int32"), "teacher_logprobs": ((seq_len, k), "float32")}
    arrays["rest_logprob"] = ((seq_len,), "float32")
    return Objective(loss_fn, reads="logits", batch_arrays=arrays)
