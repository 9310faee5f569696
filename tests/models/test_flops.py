import math

import pytest
from flax import nnx

from apertus_jax.models import flops
from apertus_jax.models.presets import get_config
from apertus_jax.models.transformer import abstract_model


@pytest.mark.slow
@pytest.mark.parametrize("name, expected", [("apertus-8b", 8.05e9), ("apertus-70b", 70.6e9)])
def test_param_counts_by_eval_shape(name, expected):
    count = flops.param_count(get_config(name))
    assert abs(count - expected) / expected < 0.005, count


@pytest.mark.slow
def test_param_count_matches_closed_form():
    for name in ("tiny", "tiny-llama", "boldt-350m"):
        c = get_config(name)
        mlp = (3 if c.mlp_type == "swiglu" else 2) * c.d_model * c.mlp_hidden + (
            2 if c.mlp_type == "xielu" else 0
        )
        attn = c.d_model * c.head_dim * (2 * c.n_heads + 2 * c.n_kv_heads) + (
            2 * c.head_dim if c.qk_norm else 0
        )
        per_layer = attn + mlp + 2 * c.d_model
        expected = c.n_layers * per_layer + c.d_model + 2 * c.vocab_size * c.d_model
        assert flops.param_count(c) == expected
        assert flops.param_count(c, include_embeddings=False) == expected - 2 * c.vocab_size * c.d_model
    boldt = flops.param_count(get_config("boldt-350m"), include_embeddings=False)
    assert 0.33e9 < boldt < 0.37e9


def test_matmul_flops_are_2_n_per_token_plus_attention():
    cfg = get_config("tiny", vocab_size=1000, tie_embeddings=True)
    t = 64
    breakdown = flops.forward_flops_breakdown(cfg, t)
    # Matrices that multiply activations: every >= 2-D parameter (the tied embedding acts as lm_head).
    n_matmul = sum(
        math.prod(v.shape) for _, v in nnx.to_flat_state(abstract_model(cfg)[1]) if len(v.shape) >= 2
    )
    attention = 2 * 2 * t * t * cfg.n_heads * cfg.head_dim * cfg.n_layers  # QK^T and AV, full square
    matmul = sum(
        breakdown[k] for k in ("attn_qkv", "attn_out", "mlp", "logits", "attn_scores", "attn_values")
    )
    assert matmul == 2 * n_matmul * t + attention
    assert flops.forward_flops(cfg, t) == sum(breakdown.values()) > matmul
    assert flops.train_flops_per_token(cfg, t) == 3 * flops.forward_flops(cfg, t) / t


def test_70b_run_reproduces_reported_total():
    # docs/recipe.md section 10: 70B at 4,096 context is 6.74e24 FLOPs for the 15T-token run.
    total = flops.train_flops_per_token(get_config("apertus-70b"), 4096) * 15e12
    assert abs(total - 6.74e24) / 6.74e24 < 0.01, total


def test_gated_vs_ungated_mlp_flops_match_at_1_5x_hidden():
    apertus, llama = get_config("bench-18m-apertus"), get_config("bench-18m-llama")
    a, b = flops.forward_flops_breakdown(apertus), flops.forward_flops_breakdown(llama)
    assert a["mlp"] == b["mlp"]
    assert a["attn_qk_norm"] > 0 == b["attn_qk_norm"]
