"""FP8 projections: e4m3/e5m2 rounding with per-tensor scales, compiled on CPU, within documented tolerances
of the bf16 model on real text."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from apertus_jax.models.fp8 import E4M3, E5M2, fp8_einsum, quantize_dequantize
from apertus_jax.models.presets import get_config
from apertus_jax.models.transformer import Apertus

TEXT = (
    "Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft und Gewissen "
    "begabt und sollen einander im Geist der Brüderlichkeit begegnen."
).encode()


@pytest.mark.slow
def test_quantize_dequantize_relative_error_and_exact_values():
    x = jnp.asarray(np.frombuffer(TEXT, np.uint8).astype(np.float32) - 100.0)
    for dtype, mantissa_bits in ((E4M3, 3), (E5M2, 2)):
        y = quantize_dequantize(x, dtype)
        # round to nearest: relative error <= 2^-(mantissa+1) for values in the normal range
        big = np.abs(np.asarray(x)) > float(jnp.max(jnp.abs(x))) / 64
        rel = np.abs(np.asarray(y - x))[big] / np.abs(np.asarray(x))[big]
        assert rel.max() <= 2.0 ** -(mantissa_bits + 1) + 1e-6
    # the largest magnitude maps to the format's maximum and back exactly; zeros stay zeros
    assert float(jnp.max(jnp.abs(quantize_dequantize(x, E4M3)))) == pytest.approx(float(jnp.max(jnp.abs(x))))
    np.testing.assert_array_equal(quantize_dequantize(jnp.zeros(4), E4M3), 0.0)


@pytest.mark.slow
def test_fp8_einsum_gradient_uses_rounded_operands():
    x = jnp.asarray(np.frombuffer(TEXT[:64], np.uint8).astype(np.float32).reshape(4, 16) / 50 - 1.5)
    w = jnp.asarray(np.frombuffer(TEXT[64:128], np.uint8).astype(np.float32).reshape(16, 4) / 50 - 1.5)
    qx, qw = quantize_dequantize(x, E4M3), quantize_dequantize(w, E4M3)
    # the scales multiply the float32 sum of FP8 products: float32 rounding apart from qx @ qw
    np.testing.assert_allclose(fp8_einsum("nd,df->nf", x, w), qx @ qw, rtol=1e-5)
    g = jnp.ones((4, 4))  # exactly representable in e5m2: dx = 1 @ qw^T, dw = qx^T @ 1
    dx, dw = jax.grad(lambda a, b: jnp.sum(fp8_einsum("nd,df->nf", a, b)), (0, 1))(x, w)
    np.testing.assert_allclose(dx, g @ qw.T, rtol=1e-5)
    np.testing.assert_allclose(dw, qx.T @ g, rtol=1e-5)


@pytest.mark.slow
def test_fp8_model_tracks_bf16_on_real_text():
    """Documented tolerances (tiny model, one forward/backward on UDHR text): the FP8 loss is within 1% of the
    bf16 loss, and every projection's gradient has cosine similarity > 0.98 with the bf16 one."""
    kwargs = dict(vocab_size=256, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16, mlp_hidden=128)
    ids = np.frombuffer(TEXT[:129], np.uint8).astype(np.int32)[None]
    tokens, targets = ids[:, :-1], ids[:, 1:]
    positions, segments, mask = np.arange(128)[None], np.ones_like(tokens), np.ones_like(tokens)

    def loss_and_grads(fp8):
        config = get_config("tiny", dtype="bfloat16", fp8=fp8, **kwargs)
        graphdef, params = nnx.split(Apertus(config, rngs=nnx.Rngs(0)), nnx.Param)

        def loss(p):
            logits = nnx.merge(graphdef, p)(tokens, positions, segments)
            nll = optax.losses.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), targets)
            return jnp.sum(nll * mask) / jnp.sum(mask)

        return jax.jit(jax.value_and_grad(loss))(params)

    (loss_bf16, grads_bf16), (loss_fp8, grads_fp8) = loss_and_grads(False), loss_and_grads(True)
    assert np.isfinite(float(loss_fp8))
    assert abs(float(loss_fp8) - float(loss_bf16)) <= 0.01 * float(loss_bf16)
    flat_bf16, flat_fp8 = nnx.to_flat_state(grads_bf16), dict(nnx.to_flat_state(grads_fp8))
    projections = 0
    for path, g in flat_bf16:
        if path[-1] in ("q_proj", "k_proj", "v_proj", "o_proj", "up", "down"):
            a = np.asarray(g[...], np.float64).ravel()
            b = np.asarray(flat_fp8[path][...], np.float64).ravel()
            assert a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) > 0.98, path
            projections += 1
    assert projections == 2 * 6
