"""Rotary position embedding, half-split ("rotate_half") layout, optional Llama-3.1 scaling (docs/recipe.md section 1)."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from apertus_jax.models.config import ModelConfig


def rope_inv_freq(config: ModelConfig) -> np.ndarray:
    """Inverse frequencies `[head_dim // 2]` float32, rounded like `transformers` (see below).

    `inv = 1 / theta^(arange(0, d, 2) / d)`; with `rope_scaling="llama3"` each frequency with wavelength
    `2 pi / inv` above `orig / low` is divided by `factor`, below `orig / high` kept, and in between
    interpolated with `s = (orig / wavelen - low) / (high - low)`: `(1 - s) inv / factor + s inv`.

    `theta^x` is rounded to float32 from float64 before the float32 reciprocal: this reproduces the
    float32 values of `transformers` bit for bit in nearly all entries (a 1-ulp difference in `inv` turns
    into ~1e-3 rad of angle at position 10^4).
    """
    d = config.head_dim
    exponent = np.arange(0, d, 2, dtype=np.float32) / np.float32(d)
    inv = np.float32(1.0) / np.power(np.float64(config.rope_theta), exponent.astype(np.float64)).astype(
        np.float32
    )
    if config.rope_scaling == "none":
        return inv
    factor = np.float32(config.rope_factor)
    low, high = config.rope_low_freq_factor, config.rope_high_freq_factor
    orig = config.rope_original_max_position_embeddings
    wavelen = np.float32(2 * math.pi) / inv
    scaled = np.where(wavelen > orig / low, inv / factor, inv)
    s = (orig / wavelen - low) / (high - low)
    smoothed = (1 - s) * scaled / factor + s * scaled
    medium = ~(wavelen < orig / high) & ~(wavelen > orig / low)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def apply_rope(x_BxTxNxH: jax.Array, positions_BxT: jax.Array, inv_freq: np.ndarray) -> jax.Array:
    """Rotate `x` `[B, T, heads, head_dim]` by angle `position * inv_freq` (half-split layout).

    The first half of `head_dim` holds the "real" parts and the second half the "imaginary" parts:
    `x * cos + rotate_half(x) * sin` with `rotate_half([x1, x2]) = [-x2, x1]`. Math in float32, result in
    `x.dtype`. Positions may exceed `max_seq_len` and `original_max_position_embeddings`.
    """
    angles_BxTxh = positions_BxT.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)
    angles_BxTxH = jnp.concatenate([angles_BxTxh, angles_BxTxh], axis=-1)[:, :, None, :]
    x = x_BxTxNxH.astype(jnp.float32)
    x1, x2 = jnp.split(x, 2, axis=-1)
    rotated = jnp.concatenate([-x2, x1], axis=-1)
    return (x * jnp.cos(angles_BxTxH) + rotated * jnp.sin(angles_BxTxH)).astype(x_BxTxNxH.dtype)
