import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from apertus_jax.models.config import ModelConfig
from apertus_jax.models.layers import MLP, XIELU, XIELU_BETA, RMSNorm, dense, rms_norm


def test_xielu_known_values_at_init():
    act = XIELU()
    y = np.asarray(act(jnp.array([2.0, 0.5, -1.0, 0.0], jnp.float32)))
    np.testing.assert_allclose(y[:3], [4.2, 0.45, -0.2056964], atol=1e-6, rtol=0)
    np.testing.assert_allclose(y[3], -8e-7, atol=1e-9)  # f(0) = alpha_n * expm1(eps), not 0
    np.testing.assert_allclose(jax.nn.softplus(act.a_p[...]), 0.8, atol=1e-7)
    np.testing.assert_allclose(XIELU_BETA + jax.nn.softplus(act.a_n[...]), 0.8, atol=1e-7)


@pytest.mark.slow
def test_xielu_gradients_reach_a_p_and_a_n():
    act = XIELU()
    x = jnp.array([2.0, -1.0], jnp.float32)
    grads = nnx.grad(lambda m: m(x).sum())(act)
    # d f / d a_p = sigmoid(a_p) * x^2 (x > 0); d f / d a_n = sigmoid(a_n) * (expm1(x) - x) (x <= 0).
    np.testing.assert_allclose(grads.a_p[...], jax.nn.sigmoid(act.a_p[...]) * 4.0, rtol=1e-6)
    np.testing.assert_allclose(
        grads.a_n[...], jax.nn.sigmoid(act.a_n[...]) * (np.expm1(-1.0) + 1.0), rtol=1e-6
    )


def test_xielu_matches_transformers_activation():
    torch = pytest.importorskip("torch")
    from transformers.activations import XIELUActivation

    x = np.random.default_rng(0).normal(scale=3.0, size=(257,)).astype(np.float32)
    reference = XIELUActivation(dtype=torch.float32)(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(np.asarray(XIELU()(jnp.asarray(x))), reference, atol=1e-6, rtol=1e-6)


def test_rms_norm_formula_in_float32():
    x = np.random.default_rng(1).normal(size=(3, 16)).astype(np.float32)
    w = np.linspace(0.5, 2.0, 16, dtype=np.float32)
    expected = w * x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(rms_norm(jnp.asarray(x), jnp.asarray(w), 1e-5), expected, rtol=1e-6)
    norm = RMSNorm(16, 1e-5, "embed")
    assert norm.weight.get_metadata()["logical_axes"] == ("embed",)
    np.testing.assert_array_equal(norm.weight[...], np.ones(16))
    assert norm(jnp.asarray(x, jnp.bfloat16)).dtype == jnp.bfloat16


@pytest.mark.slow
def test_swiglu_and_xielu_mlp_match_numpy():
    base = dict(vocab_size=8, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, head_dim=8, mlp_hidden=24)
    x = np.random.default_rng(2).normal(size=(2, 3, 16)).astype(np.float32)
    gated = MLP(ModelConfig(**base, mlp_type="swiglu"), rngs=nnx.Rngs(0))
    up, gate, down = (np.asarray(p[...], np.float64) for p in (gated.up, gated.gate, gated.down))
    g = x @ gate
    np.testing.assert_allclose(gated(jnp.asarray(x)), ((g / (1 + np.exp(-g))) * (x @ up)) @ down, atol=1e-6)
    ungated = MLP(ModelConfig(**base), rngs=nnx.Rngs(0))
    assert ungated.gate is None and ungated.up.get_metadata()["logical_axes"] == ("embed", "mlp")
    h = np.asarray(ungated.act(jnp.asarray(x @ np.asarray(ungated.up[...]))))
    np.testing.assert_allclose(ungated(jnp.asarray(x)), h @ np.asarray(ungated.down[...]), atol=1e-6)


def test_init_std():
    cfg = ModelConfig(
        vocab_size=8, d_model=256, n_layers=1, n_heads=2, n_kv_heads=1, head_dim=8, mlp_hidden=512
    )
    up = np.asarray(MLP(cfg, rngs=nnx.Rngs(0)).up[...])
    assert up.dtype == np.float32 and abs(up.std() - 0.02) < 5e-4 and abs(up.mean()) < 5e-4


@pytest.mark.parametrize("d_in, d_out", [(16, 48), (48, 16), (32, 32)])
def test_dense_gradients_equal_the_plain_einsum(d_in, d_out):
    # On CPU `dense` has its own VJP (a materialized transpose of the narrower operand); the gradients must
    # be those of the plain einsum, for wide inputs (an MLP's down projection) and narrow ones alike.
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(2, 24, d_in)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(d_in, d_out)), jnp.float32)
    cotangent = jnp.asarray(rng.normal(size=(2, 24, d_out)), jnp.float32)

    def vjp(f):
        out, pullback = jax.vjp(f, x, w)
        return (out, *pullback(cotangent))

    ours = vjp(dense)
    plain = vjp(lambda x, w: jnp.einsum("...d,df->...f", x, w))
    x64, w64, c64 = (np.asarray(a, np.float64) for a in (x, w, cotangent))
    reference = (x64 @ w64, c64 @ w64.T, np.einsum("btd,btf->df", x64, c64))
    for a, b, ref in zip(ours, plain, reference):
        assert a.shape == ref.shape and a.dtype == jnp.float32
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a, ref, rtol=1e-4, atol=1e-4)
