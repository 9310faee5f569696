import jax
import numpy as np
import pytest

from apertus_jax.models.config import ModelConfig
from apertus_jax.models.transformer import create_model

BASE = dict(vocab_size=64, d_model=32, n_layers=1, n_heads=4, n_kv_heads=2, head_dim=8, mlp_hidden=48)


def test_defaults_follow_apertus():
    cfg = ModelConfig(**BASE)
    assert (cfg.mlp_type, cfg.qk_norm, cfg.tie_embeddings) == ("xielu", True, False)
    assert (cfg.rope_theta, cfg.rope_scaling, cfg.rope_factor) == (500_000.0, "llama3", 8.0)
    assert (cfg.rope_low_freq_factor, cfg.rope_high_freq_factor) == (1.0, 4.0)
    assert cfg.rope_original_max_position_embeddings == 8192
    assert (cfg.rms_norm_eps, cfg.init_std, cfg.dtype, cfg.param_dtype) == (1e-5, 0.02, "float32", "float32")
    assert cfg.q_per_kv == 2


@pytest.mark.parametrize(
    "override, message",
    [
        (dict(n_kv_heads=3), "must divide n_heads"),
        (dict(head_dim=7), "must be even"),
        (dict(mlp_type="gelu"), "mlp_type"),
        (dict(attention_impl="flash"), "attention_impl"),
        (dict(remat_policy="some"), "remat_policy"),
        (dict(rope_scaling="yarn"), "rope_scaling"),
        (dict(dtype="int8"), "dtype"),
        (dict(d_model=0), "d_model must be a positive integer"),
        (dict(attention_impl="cudnn"), "needs dtype 'bfloat16'"),
        (dict(dtype="float16"), "dtype='float16' is not supported.*use dtype='bfloat16'"),
        (dict(dtype="float64"), "dtype='float64' needs 64-bit JAX: set JAX_ENABLE_X64=1"),
        (dict(rope_low_freq_factor=4.0, rope_high_freq_factor=1.0), "low_freq_factor < high_freq_factor"),
    ],
)
def test_invalid_fields_raise_one_line_errors(override, message):
    with pytest.raises(ValueError, match=message) as info:
        ModelConfig(**{**BASE, **override})
    assert "\n" not in str(info.value)


def test_a_float64_model_computes_in_float64_under_64_bit_jax():
    """A reference run (`dtype="float64"`) gives float64 logits (tests/jobs/test_continue_from_hf.py compares
    them with transformers')."""
    with jax.enable_x64(True):
        model = create_model(ModelConfig(**BASE, dtype="float64"))
        tokens = np.arange(8, dtype=np.int32)[None]
        logits = model(tokens, tokens, np.ones_like(tokens))
    assert logits.dtype == np.float64


def test_replace_validates():
    cfg = ModelConfig(**BASE)
    assert cfg.replace(n_kv_heads=4).n_kv_heads == 4
    with pytest.raises(ValueError):
        cfg.replace(n_kv_heads=3)


@pytest.mark.slow
def test_float16_rejection_reason_holds():
    """The reason float16 is refused: xIELU's x^2 branch overflows float16 where bfloat16 stays finite."""
    import jax.numpy as jnp

    from apertus_jax.models.layers import XIELU_A_N_INIT, XIELU_A_P_INIT, xielu

    a_p, a_n = jnp.array([XIELU_A_P_INIT]), jnp.array([XIELU_A_N_INIT])
    x = jnp.array([300.0])
    assert not jnp.isfinite(xielu(x.astype(jnp.float16), a_p, a_n)).any()
    assert jnp.isfinite(xielu(x.astype(jnp.bfloat16), a_p, a_n)).all()
