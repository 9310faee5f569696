"""Post-training losses over (prompt, completion) rows: QRPO (length-normalized) and the DPO baseline.

QRPO (Matrenok, Moalla and Gulcehre 2025, "Quantile Reward Policy Optimization", arXiv 2507.08068) regresses
the policy's log-ratio onto the closed-form optimum of the KL-regularized objective with the QUANTILE reward
`R_q(x, y)` = the fraction of reference rewards <= r(x, y) (an empirical CDF, `quantile_reward`):

    loss = (R_q - beta log Z_q - beta log(pi(y|x) / pi_ref(y|x)))^2

Under the reference policy R_q is uniform on [0, 1], so the partition function is exact:
`Z_q = E_{u~U(0,1)}[exp(u / beta)] = beta (exp(1 / beta) - 1)` (the paper's section 3); `log_partition`
evaluates its log without overflow. Apertus (tech report section 4.3) divides beta by the completion length
|y| (tokens) in every term, including the partition function: beta -> b / |y|.

`variant="apertus_trainer"` computes the loss as the Apertus post-training trainer does (docs/posttrain.md):
b' = min(b / |y|, 0.1) (b' = min(b, 0.1) without length normalization) and b' log Z_q(b') ~ b' log b' + 1, the
simplified partition function. The cap changes the loss wherever b / |y| > 0.1 (|y| < 50 tokens at b = 5).

DPO (Rafailov et al. 2023): `-log sigmoid(beta log-ratio(chosen) - beta log-ratio(rejected))`, with the same
optional length normalization (beta / |y| per completion).

Row layout (`preference_data`): segment k + 1 of a row is completion slot k (QRPO: slot 0; DPO: slot 0
chosen, slot 1 rejected); `loss_mask` marks the completion's tokens; float32 `[B, 2]` batch arrays
`ref_logprobs` (log pi_ref of each slot's completion) and `quantile_reward`.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from apertus_jax.train.step import Objective

SLOTS = 2
PREFERENCE_KEYS = ("ref_logprobs", "quantile_reward")  # float32 [B, SLOTS] batch arrays


def quantile_reward(reward, reference_rewards) -> np.ndarray:
    """The empirical CDF of the reference rewards at `reward`: mean(reference_rewards <= reward).

    Args:
      reward: float `[...]`. reference_rewards: float `[..., n]`, n >= 1 (the rewards of n reference
        completions of the same prompt; Apertus: n = 10).

    Returns:
      float64 `[...]` in [0, 1].
    """
    reward = np.asarray(reward, np.float64)
    reference_rewards = np.asarray(reference_rewards, np.float64)
    return np.mean(reference_rewards <= reward[..., None], axis=-1)


def log_partition(beta: jax.Array) -> jax.Array:
    """log Z_q = log(beta (e^{1/beta} - 1)) = log beta + 1/beta + log(1 - e^{-1/beta}), for beta > 0.

    The paper's reference code drops the last term (log Z ~ log beta + 1/beta); it is exact here, and
    below 1e-14 in magnitude for beta <= 0.03.
    """
    return jnp.log(beta) + 1.0 / beta + jnp.log(-jnp.expm1(-1.0 / beta))


def slot_logprobs(logits: jax.Array, mb: dict) -> tuple[jax.Array, jax.Array]:
    """Summed log-probabilities of each slot's completion tokens and their counts.

    Args:
      logits: float `[B, T, V]`. mb: int32 `[B, T]` targets, loss_mask, segment_ids.

    Returns:
      `(logp, lengths)`, float32 `[B, SLOTS]`: sum of log pi(target) over the slot's masked positions, and
      their number (0 for an empty slot).
    """
    logits = logits.astype(jnp.float32)
    token_logp = jnp.take_along_axis(logits, mb["targets"][..., None], axis=-1)[..., 0]
    token_logp = token_logp - jax.nn.logsumexp(logits, axis=-1)
    mask = mb["loss_mask"].astype(bool)
    slots = (mb["segment_ids"][..., None] == jnp.arange(1, SLOTS + 1)) & mask[..., None]  # [B, T, S]
    logp = jnp.sum(jnp.where(slots, token_logp[..., None], 0.0), axis=1)
    return logp, jnp.sum(slots, axis=1, dtype=jnp.float32)


def _beta(beta: float, lengths: jax.Array, length_normalized: bool) -> jax.Array:
    return beta / jnp.maximum(lengths, 1.0) if length_normalized else jnp.full_like(lengths, beta)


# The Apertus trainer's cap on b' (its reason: the gradient norm grows too large for short completions).
APERTUS_TRAINER_MAX_BETA = 0.1


def qrpo_terms(
    logp, ref_logp, quantile, lengths, beta: float, length_normalized: bool, variant: str = "exact"
):
    """Per-completion QRPO residual `R_q - b' log Z_q(b') - b' (logp - ref_logp)` and b'.

    Args:
      logp, ref_logp: float32 `[...]` summed log-probabilities (nats) of each completion under the policy and
        the reference. quantile: float32 `[...]` R_q in [0, 1]. lengths: float32 `[...]` |y| in tokens.
      beta: b > 0. length_normalized: b' = b / |y| (else b).
      variant: "exact" (b' log Z_q(b') with `log_partition`) or "apertus_trainer" (b' capped at
        `APERTUS_TRAINER_MAX_BETA`, b' log Z_q ~ b' log b' + 1; module docstring).

    Returns:
      `(residual, b')`, float32 arrays of the shape of `logp`.
    """
    b = _beta(beta, lengths, length_normalized)
    if variant == "apertus_trainer":
        b = jnp.minimum(b, APERTUS_TRAINER_MAX_BETA)
        # b log(b (e^{1/b} - 1)) without the log(1 - e^{-1/b}) term, which is below 5e-5 for b <= 0.1.
        b_log_z = b * jnp.log(b) + 1.0
    else:
        b_log_z = b * log_partition(b)
    return quantile - b_log_z - b * (logp - ref_logp), b


def qrpo_loss(beta: float, length_normalized: bool, variant: str = "exact") -> Callable:
    """The train step's `loss_fn(logits, mb, frozen) -> (loss_sum, sums)` of QRPO (see the module docstring;
    `variant` as in `qrpo_terms`).

    Every non-empty slot is one example: loss_sum = sum of squared residuals, count = examples.
    sums also hold the per-example means of quantile_reward, log_ratio (log pi/pi_ref of the completion)
    and log_ratio_per_token (the implicit KL estimate per token), summed over the batch.
    """

    def loss_fn(logits, mb, frozen):
        del frozen  # the reference's log-probs come with the batch
        logp, lengths = slot_logprobs(logits, mb)
        residual, _ = qrpo_terms(
            logp, mb["ref_logprobs"], mb["quantile_reward"], lengths, beta, length_normalized, variant
        )
        valid = lengths > 0
        where = lambda x: jnp.sum(jnp.where(valid, x, 0.0))
        log_ratio = logp - mb["ref_logprobs"]
        return where(residual**2), {
            "count": jnp.sum(valid, dtype=jnp.float32),
            "quantile_reward": where(mb["quantile_reward"]),
            "log_ratio": where(log_ratio),
            "log_ratio_per_token": where(log_ratio / jnp.maximum(lengths, 1.0)),
        }

    return loss_fn


def dpo_margin(logp, ref_logp, lengths, beta: float, length_normalized: bool) -> jax.Array:
    """`b'_c log-ratio(chosen) - b'_r log-ratio(rejected)` from `[..., 2]` slot arrays (slot 0 chosen)."""
    rewards = _beta(beta, lengths, length_normalized) * (logp - ref_logp)
    return rewards[..., 0] - rewards[..., 1]


def dpo_loss(beta: float, length_normalized: bool) -> Callable:
    """The train step's `loss_fn(logits, mb, frozen) -> (loss_sum, sums)` of DPO: -log sigmoid(margin) per pair.

    A row is a pair when both slots are non-empty; count = pairs. sums also hold chosen_reward,
    rejected_reward (b' log-ratios), margin and accuracy (margin > 0), per pair.
    """

    def loss_fn(logits, mb, frozen):
        del frozen  # the reference's log-probs come with the batch
        logp, lengths = slot_logprobs(logits, mb)
        margin = dpo_margin(logp, mb["ref_logprobs"], lengths, beta, length_normalized)
        rewards = _beta(beta, lengths, length_normalized) * (logp - mb["ref_logprobs"])
        valid = jnp.all(lengths > 0, axis=-1)
        where = lambda x: jnp.sum(jnp.where(valid, x, 0.0))
        return where(jax.nn.softplus(-margin)), {
            "count": jnp.sum(valid, dtype=jnp.float32),
            "chosen_reward": where(rewards[:, 0]),
            "rejected_reward": where(rewards[:, 1]),
            "margin": where(margin),
            "accuracy": where((margin > 0).astype(jnp.float32)),
        }

    return loss_fn


def objective_for(posttrain) -> Objective | None:
    """The train step's objective of a `PosttrainConfig`: None for "lm" (the pretraining cross-entropy over
    `loss_mask`, which SFT's assistant-only mask makes the SFT loss); QRPO and DPO read the float32 `[B, 2]`
    batch arrays `PREFERENCE_KEYS`."""
    arrays = {key: ((SLOTS,), "float32") for key in PREFERENCE_KEYS}
    if posttrain.objective == "qrpo":
        return Objective(
            qrpo_loss(posttrain.beta, posttrain.length_normalized, posttrain.qrpo_variant),
            batch_arrays=arrays,
        )
    if posttrain.objective == "dpo":
        return Objective(dpo_loss(posttrain.beta, posttrain.length_normalized), batch_arrays=arrays)
    return None
