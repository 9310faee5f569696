"""Next-token cross-entropy summed over unmasked tokens (the trainer divides once by the total count)."""

import jax
import jax.numpy as jnp


def cross_entropy_sum(
    logits_BxTxV: jax.Array, targets_BxT: jax.Array, loss_mask_BxT: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Returns (sum of token losses, number of unmasked tokens), both float32 scalars.

    Summing rather than averaging lets gradient accumulation normalize by the total unmasked-token count of
    the whole batch (Apertus/Megatron normalize per global batch), so microbatches with unequal counts
    weigh each token equally. Masked positions contribute exactly 0 to the value AND to the gradient, even if
    their logits are not finite: the logits of masked positions are replaced by 0 before the logsumexp (the
    "double where"), because a `where` applied only after it still backpropagates 0 * NaN = NaN into them
    (JAX FAQ, "gradients contain NaN where using where").

    Args:
      logits_BxTxV: logits, any float dtype (upcast to float32 for the log-softmax).
      targets_BxT: int32 next-token ids.
      loss_mask_BxT: 0/1 (int or bool); 0 drops the position (EoD input, Goldfish, padding; docs/recipe.md 2-3).
    """
    mask_BxT = loss_mask_BxT.astype(bool)
    logits_BxTxV = jnp.where(mask_BxT[..., None], logits_BxTxV.astype(jnp.float32), 0.0)
    log_z_BxT = jax.nn.logsumexp(logits_BxTxV, axis=-1)
    target_logit_BxT = jnp.take_along_axis(logits_BxTxV, targets_BxT[..., None], axis=-1)[..., 0]
    loss_sum = jnp.sum(jnp.where(mask_BxT, log_z_BxT - target_logit_BxT, 0.0))
    return loss_sum, jnp.sum(mask_BxT, dtype=jnp.float32)
