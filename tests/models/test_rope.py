import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.models.attention import apply_rope, rope_inv_freq
from apertus_jax.models.config import ModelConfig


def _config(**overrides):
    return ModelConfig(
        vocab_size=8, d_model=32, n_layers=1, n_heads=2, n_kv_heads=1, head_dim=128, mlp_hidden=8, **overrides
    )


def test_unscaled_frequencies():
    inv = rope_inv_freq(_config(rope_scaling="none", rope_theta=10_000.0))
    np.testing.assert_allclose(inv, 1.0 / 10_000.0 ** (np.arange(0, 128, 2) / 128), rtol=1e-6)


def test_llama3_scaling_bands():
    cfg = _config()
    plain = rope_inv_freq(cfg.replace(rope_scaling="none"))
    scaled = rope_inv_freq(cfg)
    wavelen = 2 * math.pi / plain
    high = wavelen < 8192 / 4
    low = wavelen > 8192 / 1
    np.testing.assert_array_equal(scaled[high], plain[high])
    np.testing.assert_allclose(scaled[low], plain[low] / 8, rtol=1e-6)
    middle = ~high & ~low
    assert (
        middle.any() and np.all(scaled[middle] < plain[middle]) and np.all(scaled[middle] > plain[middle] / 8)
    )


def test_llama3_frequencies_match_transformers():
    pytest.importorskip("torch")
    from transformers import ApertusConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    for head_dim, theta in ((128, 500_000.0), (24, 12_000_000.0)):
        hf = ApertusConfig(
            hidden_size=96,
            num_attention_heads=4,
            head_dim=head_dim,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": theta,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
        )
        reference, _ = ROPE_INIT_FUNCTIONS["llama3"](hf, "cpu")
        ours = rope_inv_freq(_config(rope_theta=theta).replace(head_dim=head_dim))
        np.testing.assert_array_equal(ours, reference.numpy())


@pytest.mark.slow
def test_half_split_layout_is_complex_rotation():
    cfg = _config(rope_scaling="none")
    x = np.random.default_rng(0).normal(size=(1, 3, 2, 128)).astype(np.float32)
    positions = np.array([[0, 7, 9000]], np.int32)
    out = np.asarray(apply_rope(jnp.asarray(x), jnp.asarray(positions), rope_inv_freq(cfg)))
    z = (x[..., :64] + 1j * x[..., 64:]) * np.exp(1j * positions[..., None, None] * rope_inv_freq(cfg))
    np.testing.assert_allclose(out, np.concatenate([z.real, z.imag], -1), atol=2e-4)
    np.testing.assert_array_equal(out[:, 0], x[:, 0])  # position 0 is the identity


@jax.jit
def _rotated_score(q, k, m, n, inv_freq):
    return jnp.sum(apply_rope(q, m, inv_freq) * apply_rope(k, n, inv_freq))


@settings(max_examples=20, deadline=None)
@given(m=st.integers(0, 20_000), n=st.integers(0, 20_000), shift=st.integers(0, 5_000))
def test_scores_depend_only_on_relative_position(m, n, shift):
    rng = np.random.default_rng(1)
    q, k = (jnp.asarray(rng.normal(size=(1, 1, 1, 128)).astype(np.float32)) for _ in range(2))
    inv = jnp.asarray(rope_inv_freq(_config()))

    def score(a, b):
        return float(_rotated_score(q, k, jnp.array([[a]], jnp.int32), jnp.array([[b]], jnp.int32), inv))

    # float32 rounds each angle `position * inv_freq` to within 2^-24 of itself, which moves the score of a
    # frequency pair by up to its |q| |k| times its angles' errors (four angles: m, n, m + shift, n + shift);
    # at positions near 20,000 that is several 1e-3 (hypothesis found 7.5e-3). The rest is summation rounding.
    q_np, k_np = np.asarray(q)[0, 0, 0], np.asarray(k)[0, 0, 0]
    pair = np.hypot(q_np[:64], q_np[64:]) * np.hypot(k_np[:64], k_np[64:])
    angle_bound = float(np.sum(pair * np.asarray(inv))) * 2.0**-24 * 2 * (m + n + shift)
    assert score(m, n) == pytest.approx(score(m + shift, n + shift), abs=angle_bound + 1e-4)
