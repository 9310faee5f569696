"""Distillation from stored teacher logits (Apertus Mini; docs/recipe.md section 13): the store, the batch
source that reads it, and the objective.

    source = TeacherLogits(pipeline_batch_source(run), logits_dir, read_meta(logits_dir))
    objective = distillation(seq_len, k, alpha=0.9, temperature=1.0)

The store (`apertus_jax.jobs.distill.write_teacher_logits` writes it): per step, the teacher's `k` most likely
next tokens and their log-probabilities at every position, with the log of the remaining probability mass, in
`logits_dir/step_NNNNNNNN.safetensors` (`step_file`), and `meta.json`. Each step's file carries a checksum of
its tokens (`tokens_checksum`), so a misaligned store fails loudly instead of teaching the wrong rows. The store
is checked whole before the first step (`check_store`: every step file present and readable; `TeacherLogits`:
the first step's rows are the student's first batch), so a broken store is refused before the run writes
anything. Each file records the teacher that wrote it (its safetensors metadata), so a rerun of an interrupted
pass keeps the files it finds whole, of the same teacher and rows (`holds_step`), and writes the others.

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
from safetensors import SafetensorError, safe_open
from safetensors.numpy import load_file

from apertus_jax.train.batches import BatchSource
from apertus_jax.train.step import Objective

META = "meta.json"
ARRAYS = ("teacher_ids", "teacher_logprobs", "rest_logprob")
CHECKSUM = "tokens_sha256"
# The fix of a store that cannot teach the student's run.
STORE_FIX = (
    "write the store again with `python -m experiments.teacher_logits` with the student's --config and overrides "
    "and --steps of at least its train.steps"
)
LOG_FLOOR = -100.0  # the log-probability a student probability that underflows counts as (exp(-100))


def step_file(logits_dir: str, step: int) -> str:
    """The store's file of step `step` (1-based)."""
    return os.path.join(logits_dir, f"step_{step:08d}.safetensors")


def tokens_checksum(tokens: np.ndarray) -> np.ndarray:
    """sha256 of int32 `[rows, T]` tokens as 32 uint8: what a step file stores to prove its rows."""
    return np.frombuffer(hashlib.sha256(np.ascontiguousarray(tokens, np.int32).tobytes()).digest(), np.uint8)


def holds_step(logits_dir: str, step: int, tokens: np.ndarray, teacher: dict[str, str]) -> bool:
    """Whether the store's file of `step` is whole and holds the logits of `teacher` (the `{name: value}`
    strings its writer records in the file's safetensors metadata: the teacher's workdir, step and k) for the
    rows `tokens` (int32 `[rows, T]`, by `tokens_checksum`). Reads the header and the checksum only.

    A store written in part (an interrupted `write_teacher_logits`) keeps the files for which this holds.
    """
    path = step_file(logits_dir, step)
    if not os.path.isfile(path):
        return False
    try:
        with safe_open(path, framework="numpy") as f:
            if (f.metadata() or {}) != teacher or not set(ARRAYS) | {CHECKSUM} <= set(f.keys()):
                return False
            shape = tuple(f.get_slice(ARRAYS[0]).get_shape())
            checksum = f.get_tensor(CHECKSUM)
    except (SafetensorError, OSError):
        return False
    return shape == (*tokens.shape, int(teacher["k"])) and np.array_equal(checksum, tokens_checksum(tokens))


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


def _step_shapes(logits_dir: str, step: int) -> dict[str, tuple[int, ...]]:
    """{array name: shape} of the store's file of `step`, from its header (the arrays are not read).

    Raises:
      ValueError: the file is missing or unreadable (one line naming the store, the file and `STORE_FIX`).
    """
    path = step_file(logits_dir, step)
    if not os.path.isfile(path):
        raise ValueError(
            f"teacher logits {logits_dir}: {os.path.basename(path)} (step {step}) is missing; {STORE_FIX}"
        )
    try:
        with safe_open(path, framework="numpy") as f:
            return {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
    except (SafetensorError, OSError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(
            f"teacher logits {logits_dir}: {os.path.basename(path)} (step {step}) is unreadable ({reason}); "
            f"{STORE_FIX}"
        ) from None


def check_store(logits_dir: str, meta: dict, steps: int) -> None:
    """Checks the step files 1..`steps` of the store `logits_dir` (its `meta.json` read as `meta`) from their
    headers: each present and readable, with the arrays `ARRAYS` and the tokens' checksum, the teacher's of
    `[rows, meta["seq_len"], meta["k"]]`. Reads no array: a store of many GB is checked in seconds.

    Raises:
      ValueError: one line naming the store, the first bad step file, the problem and the fix.
    """
    for step in range(1, steps + 1):
        shapes = _step_shapes(logits_dir, step)
        missing = [name for name in (*ARRAYS, CHECKSUM) if name not in shapes]
        if missing:
            raise ValueError(
                f"teacher logits {logits_dir}: {os.path.basename(step_file(logits_dir, step))} (step {step}) has "
                f"no {', '.join(missing)}; {STORE_FIX}"
            )
        expected = (meta["seq_len"], meta["k"])
        if any(shapes[name][1:] != expected for name in ARRAYS[:2]):
            raise ValueError(
                f"teacher logits {logits_dir}: {os.path.basename(step_file(logits_dir, step))} (step {step}) holds "
                f"arrays of shape {shapes['teacher_ids']}, meta.json says rows of {expected[0]} tokens and "
                f"k={expected[1]}; {STORE_FIX}"
            )


class TeacherLogits:
    """A batch source (`apertus_jax.train.batches.BatchSource`): `inner`'s batches with the stored teacher
    arrays of the same step attached (`teacher_ids` int32 and `teacher_logprobs` float32, `[rows, T, k]`).

    The constructor checks that the store's first step holds the rows of `inner`'s first batch: it reads that
    batch and sets `inner` back to where it was (the loop builds its batch source before it writes anything).

    Raises:
      ValueError: the store's first step is of other rows (from the constructor); the store ends before this
        step, or its rows are not this step's (token checksum; from `__next__`).
    """

    def __init__(self, inner: BatchSource, logits_dir: str, meta: dict):
        self.inner, self.logits_dir, self.step = inner, logits_dir, 0
        self.k = meta["k"]
        start = inner.get_state()
        first = next(inner)
        inner.set_state(start)
        _step_shapes(logits_dir, 1)
        with safe_open(step_file(logits_dir, 1), framework="numpy") as f:
            self._check_rows(1, first["tokens"], f.get_tensor(CHECKSUM))

    def _check_rows(self, step: int, tokens: np.ndarray, checksum: np.ndarray) -> None:
        """Raises ValueError (one line with `STORE_FIX`) unless `checksum` is that of the student's `tokens`."""
        if not np.array_equal(checksum, tokens_checksum(tokens)):
            raise ValueError(
                f"teacher logits {self.logits_dir}: step {step} holds the teacher's logits of other rows than the "
                f"student's step {step} (another data pipeline, seed or batch plan); {STORE_FIX}"
            )

    def __iter__(self) -> TeacherLogits:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        batch = next(self.inner)
        self.step += 1
        _step_shapes(self.logits_dir, self.step)  # missing or unreadable: the line of `check_store`
        stored = load_file(step_file(self.logits_dir, self.step))
        self._check_rows(self.step, batch["tokens"], stored[CHECKSUM])
        expected = (*batch["tokens"].shape, self.k)
        if any(stored[name].shape != expected for name in ARRAYS[:2]):
            raise ValueError(
                f"teacher logits {self.logits_dir}: step {self.step} holds arrays of shape "
                f"{stored['teacher_ids'].shape}, the step needs {expected}; {STORE_FIX}"
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


def loss_label(alpha: float, temperature: float) -> str:
    """How the objective's loss is made, for a plot's title: `ALPHA x tau^2 x KL + (1 - ALPHA) x CE at tau T`."""
    return f"{alpha:g} x tau^2 x KL + {1 - alpha:g} x CE at tau {temperature:g}"


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
