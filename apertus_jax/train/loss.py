"""The pretraining objective: next-token cross-entropy fused with the lm_head, masked, with the z-loss.

    objective = cross_entropy(z_loss_weight=1e-5, chunk_tokens=256)   # an `apertus_jax.train.step.Objective`

The loss is summed over unmasked tokens; the train step divides once by the total count. The lm_head and the
loss run chunk by chunk, never forming `[B, T, V]` logits (`fused_cross_entropy_sum`); `chunked_token_logprobs`
is the same head for per-token log-probabilities (evaluation, scoring).
"""

import jax
import jax.numpy as jnp

from apertus_jax.train.step import Objective

# Tokens per chunk of the fused lm_head + loss: [chunk, vocab] float32 logits (32 MB for 256 tokens at a
# 32k vocabulary) stay in the last-level cache on CPU and are small next to the activations on accelerators.
DEFAULT_CHUNK_TOKENS = 256


def _chunked(hidden_BxTxD, targets_BxT, loss_mask_BxT, chunk_tokens):
    """Splits along the sequence into `[C, B, T/C...]` chunks of about `chunk_tokens` tokens (all rows each,
    so a batch-sharded chunk stays spread over the devices); pads T with masked positions when needed."""
    rows, length = targets_BxT.shape
    chunk_len = max(1, min(length, chunk_tokens // rows))
    padded = -(-length // chunk_len) * chunk_len
    pad = padded - length
    if pad:
        hidden_BxTxD = jnp.pad(hidden_BxTxD, ((0, 0), (0, pad), (0, 0)))
        targets_BxT = jnp.pad(targets_BxT, ((0, 0), (0, pad)))
        loss_mask_BxT = jnp.pad(loss_mask_BxT, ((0, 0), (0, pad)))

    def split(x):
        x = x.reshape(rows, padded // chunk_len, chunk_len, *x.shape[2:])
        return jnp.moveaxis(x, 1, 0)

    return split(hidden_BxTxD), split(targets_BxT), split(loss_mask_BxT.astype(bool)), pad


def _chunk_logits(h_BxCxD, w_DxV):
    """float32 logits of one chunk (matmul inputs in the hidden state's dtype, float32 accumulation)."""
    return jnp.einsum("bcd,dv->bcv", h_BxCxD, w_DxV.astype(h_BxCxD.dtype), preferred_element_type=jnp.float32)


def _chunk_terms(logits_BxCxV, targets_BxC, mask_BxC):
    """log Z, per-token cross-entropy and z-loss terms (0 where masked, even for non-finite logits)."""
    log_z_BxC = jax.nn.logsumexp(logits_BxCxV, axis=-1)
    target_logit_BxC = jnp.take_along_axis(logits_BxCxV, targets_BxC[..., None], axis=-1)[..., 0]
    ce_BxC = jnp.where(mask_BxC, log_z_BxC - target_logit_BxC, 0.0)
    z_BxC = jnp.where(mask_BxC, jnp.square(log_z_BxC), 0.0)
    return log_z_BxC, ce_BxC, z_BxC


def _fused_sums(hidden_BxTxD, w_DxV, targets_BxT, loss_mask_BxT, chunk_tokens, z_loss_weight):
    """(objective sum, cross-entropy sum, z-loss sum), forward only, chunk by chunk."""
    h, t, m, _ = _chunked(hidden_BxTxD, targets_BxT, loss_mask_BxT, chunk_tokens)

    def chunk(args):
        _, ce, z = _chunk_terms(_chunk_logits(args[0], w_DxV), args[1], args[2])
        return jnp.sum(ce), jnp.sum(z)

    ce, z = jax.lax.map(chunk, (h, t, m))
    ce, z = jnp.sum(ce), jnp.sum(z)
    return ce + z_loss_weight * z, ce, z


def _fused_fwd(hidden_BxTxD, w_DxV, targets_BxT, loss_mask_BxT, chunk_tokens, z_loss_weight):
    """The sums and, in the same pass over each chunk, their gradients wrt the hidden state and the weights.

    d objective / d logits = softmax * (1 + 2 w_z log Z) - onehot(target) at unmasked positions, exactly 0 at
    masked ones (a `where`, so a non-finite masked logit gives a 0 gradient, never NaN).
    """
    h, t, m, pad = _chunked(hidden_BxTxD, targets_BxT, loss_mask_BxT, chunk_tokens)
    dtype = hidden_BxTxD.dtype
    w_c = w_DxV.astype(dtype)
    on_cpu = jax.default_backend() == "cpu"

    def chunk(dw_DxV, args):
        h_BxCxD, t_BxC, m_BxC = args
        logits = _chunk_logits(h_BxCxD, w_DxV)
        log_z, ce, z = _chunk_terms(logits, t_BxC, m_BxC)
        probs = jnp.exp(logits - log_z[..., None]) * (1.0 + 2.0 * z_loss_weight * log_z)[..., None]
        is_target = jax.lax.broadcasted_iota(jnp.int32, logits.shape, 2) == t_BxC[..., None]
        dlogits = jnp.where(m_BxC[..., None], jnp.where(is_target, probs - 1.0, probs), 0.0).astype(dtype)
        dh = jnp.einsum("bcv,dv->bcd", dlogits, w_c, preferred_element_type=jnp.float32).astype(dtype)
        h_NxD = h_BxCxD.reshape(-1, h_BxCxD.shape[-1])
        # XLA:CPU otherwise writes the logit gradient transposed for h^T @ dlogits (see layers.dense).
        h_DxN = jax.lax.optimization_barrier(h_NxD.T) if on_cpu else h_NxD.T
        dw_DxV = dw_DxV + jnp.matmul(
            h_DxN, dlogits.reshape(-1, dlogits.shape[-1]), preferred_element_type=jnp.float32
        )
        return dw_DxV, (jnp.sum(ce), jnp.sum(z), dh)

    dw, (ce, z, dh) = jax.lax.scan(chunk, jnp.zeros(w_DxV.shape, jnp.float32), (h, t, m))
    rows, length = targets_BxT.shape
    dh_BxTxD = jnp.moveaxis(dh, 0, 1).reshape(rows, length + pad, -1)[:, :length]
    ce, z = jnp.sum(ce), jnp.sum(z)
    return (ce + z_loss_weight * z, ce, z), (dh_BxTxD, dw.astype(w_DxV.dtype))


def _fused_bwd(chunk_tokens, z_loss_weight, residuals, cotangents):
    # Only the objective is differentiable: the public wrapper stops the gradient of the other two outputs.
    del chunk_tokens, z_loss_weight
    dh, dw = residuals
    g = cotangents[0]
    return (g * dh).astype(dh.dtype), (g * dw).astype(dw.dtype), None, None


_fused = jax.custom_vjp(_fused_sums, nondiff_argnums=(4, 5))
_fused.defvjp(_fused_fwd, _fused_bwd)


def fused_cross_entropy_sum(
    hidden_BxTxD: jax.Array,
    w_DxV: jax.Array,
    targets_BxT: jax.Array,
    loss_mask_BxT: jax.Array,
    *,
    z_loss_weight: float = 0.0,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
) -> dict[str, jax.Array]:
    """The lm_head and the summed next-token loss in one pass, chunk by chunk, never forming `[B, T, V]`.

    Equals the cross-entropy of the logits `hidden @ w` summed over unmasked tokens (plus the z-loss) up to
    float32 summation order. Summing rather than averaging lets gradient accumulation normalize by the total
    unmasked-token count of the whole batch (Apertus/Megatron normalize per global batch), so microbatches with
    unequal counts weigh each token equally. Under differentiation the logit gradient of each chunk is formed in the forward pass while the
    chunk's logits are in cache, so the backward pass is two multiplications by the incoming scalar
    cotangent: the same FLOPs as the unfused head, no `[B, T, V]` buffer, no recomputation.

    z-loss (PaLM, Chowdhery et al. 2022, section 5; OLMo 2): `z_loss_weight * sum(log Z^2)` over unmasked
    tokens, with log Z the log-partition of the logits; it keeps log Z near 0 (bf16-friendly logits).

    Args:
      hidden_BxTxD: final (normalized) hidden state, compute dtype (bf16 or float32).
      w_DxV: output projection `[d_model, vocab]` (any float dtype; cast to the hidden dtype for the matmul).
      targets_BxT: int32 next-token ids.
      loss_mask_BxT: 0/1; 0 drops the position, with an exactly-0 gradient even for non-finite logits.
      z_loss_weight: static float >= 0.
      chunk_tokens: static; tokens (all rows x a slice of positions) per chunk.

    Returns:
      dict of float32 scalars: "objective" (cross-entropy + weighted z-loss: differentiate this), "loss"
      (cross-entropy sum), "z_loss" (sum of log Z^2), "count" (unmasked tokens); only "objective" carries a
      gradient.
    """
    objective, ce, z = _fused(
        hidden_BxTxD, w_DxV, targets_BxT, loss_mask_BxT, int(chunk_tokens), float(z_loss_weight)
    )
    count = jnp.sum(loss_mask_BxT.astype(bool), dtype=jnp.float32)
    return {
        "objective": objective,
        "loss": jax.lax.stop_gradient(ce),
        "z_loss": jax.lax.stop_gradient(z),
        "count": count,
    }


def chunked_token_logprobs(
    hidden_BxTxD: jax.Array,
    w_DxV: jax.Array,
    targets_BxT: jax.Array,
    *,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
) -> jax.Array:
    """`log softmax(hidden @ w)[b, t, targets[b, t]]` float32 `[B, T]`, chunk by chunk without `[B, T, V]`.

    Differentiable for any per-token weighting (evaluation, DPO-style post-training): each chunk is
    `jax.checkpoint`ed, so its logits are recomputed in the backward pass instead of stored.
    """
    rows, length = targets_BxT.shape
    h, t, _, pad = _chunked(hidden_BxTxD, targets_BxT, jnp.ones_like(targets_BxT), chunk_tokens)

    @jax.checkpoint
    def chunk(h_BxCxD, t_BxC):
        logits = _chunk_logits(h_BxCxD, w_DxV)
        log_z = jax.nn.logsumexp(logits, axis=-1)
        return jnp.take_along_axis(logits, t_BxC[..., None], axis=-1)[..., 0] - log_z

    logprobs = jax.lax.map(lambda args: chunk(*args), (h, t))
    return jnp.moveaxis(logprobs, 0, 1).reshape(rows, length + pad)[:, :length]


def cross_entropy(z_loss_weight: float = 0.0, chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> Objective:
    """The pretraining (and SFT) objective: `fused_cross_entropy_sum` over `loss_mask` (0 drops a position: EoD
    input, Goldfish, padding, prompt tokens; docs/recipe.md 2-3), normalized by the unmasked tokens. The step
    reports "loss" (cross-entropy per token) and "z_loss" (mean log Z^2)."""

    def loss_fn(outputs, mb, frozen):
        del frozen
        hidden_BxTxD, w_DxV = outputs
        out = fused_cross_entropy_sum(
            hidden_BxTxD,
            w_DxV,
            mb["targets"],
            mb["loss_mask"],
            z_loss_weight=z_loss_weight,
            chunk_tokens=chunk_tokens,
        )
        return out["objective"], {k: out[k] for k in ("loss", "z_loss", "count")}

    return Objective(loss_fn, reads="hidden")
