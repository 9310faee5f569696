"""The fused, chunked lm_head + loss equals the cross-entropy of the logits (values and gradients, float32 and
bf16, masked positions, exact zeros where masked even for non-finite values); the z-loss by hand."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from apertus_jax.train.loss import chunked_token_logprobs, fused_cross_entropy_sum


def cross_entropy_sum(logits_BxTxV, targets_BxT, loss_mask_BxT):
    """The reference over logits: (summed cross-entropy of unmasked tokens, their count) with optax."""
    nll = optax.losses.softmax_cross_entropy_with_integer_labels(
        logits_BxTxV.astype(jnp.float32), targets_BxT
    )
    mask = loss_mask_BxT.astype(bool)
    return jnp.where(mask, nll, 0.0).sum(), mask.sum(dtype=jnp.float32)


def z_loss_sum(logits_BxTxV, loss_mask_BxT):
    log_z = jax.nn.logsumexp(logits_BxTxV.astype(jnp.float32), axis=-1)
    return jnp.where(loss_mask_BxT.astype(bool), jnp.square(log_z), 0.0).sum()


ROWS, LENGTH = 4, 32


@pytest.fixture(scope="module", params=["float32", "bfloat16"])
def tiny(request, text_batch, tiny_model):
    """(hidden_fn, apply_fn, params, batch with masked positions) of the tiny byte-level model on real text."""
    spec, params = tiny_model(dtype=request.param)
    batch = text_batch(rows=ROWS, length=LENGTH)
    batch["loss_mask"][1, 5:] = 0
    batch["loss_mask"][3] = 0
    return request.param, *_batch_fns(spec), params, batch


def _batch_fns(spec):
    """(hidden_fn, apply_fn) of a model spec, each of (params, batch)."""

    def hidden_fn(p, batch):
        return spec.hidden_fn(p, batch["tokens"], batch["positions"], batch["segment_ids"])

    def apply_fn(p, batch):
        return spec.apply_fn(p, batch["tokens"], batch["positions"], batch["segment_ids"])

    return hidden_fn, apply_fn


def _objectives(hidden_fn, apply_fn, batch, chunk_tokens):
    def fused(p):
        hidden, w = hidden_fn(p, batch)
        out = fused_cross_entropy_sum(
            hidden, w, batch["targets"], batch["loss_mask"], z_loss_weight=1e-2, chunk_tokens=chunk_tokens
        )
        return out["objective"], out

    def unfused(p):
        logits = apply_fn(p, batch)
        loss_sum, count = cross_entropy_sum(logits, batch["targets"], batch["loss_mask"])
        return loss_sum + 1e-2 * z_loss_sum(logits, batch["loss_mask"]), {"loss": loss_sum, "count": count}

    return fused, unfused


@pytest.mark.slow
@pytest.mark.parametrize("chunk_tokens", [40, 128, 4096])  # 40: 10 positions per chunk, T padded to 40
def test_fused_equals_unfused_loss_and_gradients(tiny, tiny_model, chunk_tokens):
    dtype, hidden_fn, apply_fn, params, batch = tiny
    fused, unfused = _objectives(hidden_fn, apply_fn, batch, chunk_tokens)
    (obj_f, out), grads_f = jax.jit(jax.value_and_grad(fused, has_aux=True))(params)
    (obj_u, aux), grads_u = jax.jit(jax.value_and_grad(unfused, has_aux=True))(params)
    assert float(out["count"]) == float(aux["count"]) == batch["loss_mask"].sum()
    np.testing.assert_allclose(obj_f, obj_u, rtol=2e-6)
    np.testing.assert_allclose(out["loss"], aux["loss"], rtol=2e-6)
    # float32: summation order only. bf16: the fused head multiplies bf16-rounded logit gradients and
    # accumulates the weight gradient in float32 across chunks, the unfused one rounds differently; the
    # bf16 backward through the layers carries those roundings (measured up to ~1.1% of the largest entry).
    # xIELU's scalars (alpha_p, alpha_n of each layer) are the exception: each gradient sums B x T x F bf16
    # products that largely cancel, so both heads land up to ~8% from the float32 gradient (measured, jax 0.12)
    # and up to 3.4% from each other; they are checked against the float32 gradient instead.
    rtol = 1e-5 if dtype == "float32" else 2**-5
    if dtype == "bfloat16":
        spec32, params32 = tiny_model(dtype="float32")
        _, unfused32 = _objectives(*_batch_fns(spec32), batch, chunk_tokens)
        grads_32 = jax.jit(jax.grad(lambda p: unfused32(p)[0]))(params32)
    for path, g_f in jax.tree_util.tree_leaves_with_path(grads_f):
        g_u = _get(grads_u, path)
        if dtype == "bfloat16" and g_u.size == 1:
            g_32 = float(_get(grads_32, path)[0])
            for g in (g_f, g_u):
                assert abs(float(g[0]) - g_32) <= 2**-3 * abs(g_32), (path, float(g[0]), g_32)
            continue
        scale = float(np.abs(np.asarray(g_u, np.float64)).max()) + 1e-30
        assert (
            float(np.abs(np.asarray(g_f, np.float64) - np.asarray(g_u, np.float64)).max()) <= rtol * scale
        ), path


def _get(tree, path):
    for key in path:
        tree = tree[key.key]
    return tree


def test_z_loss_and_gradient_hand_computed():
    """Two tokens whose logits are the rows of w (hidden = identity rows), z_loss_weight 0.5:
    token 1: logits log[1, 1, 1, 1], target 0: log Z = ln 4, CE = ln 4, z = (ln 4)^2;
    token 2: logits log[1/2, 1/4, 1/8, 1/8], target 1: log Z = 0, CE = ln 4, z = 0.
    objective = 2 ln 4 + 0.5 (ln 4)^2 = 2.7725887 + 0.9609060 = 3.7334947.
    d objective / d logits = softmax (1 + 2 * 0.5 * log Z) - onehot:
    token 1: 0.25 (1 + ln 4) = 0.5965736 everywhere, minus 1 at 0; token 2: [0.5, -0.75, 0.125, 0.125]."""
    w = jnp.log(jnp.array([[1.0, 1.0, 1.0, 1.0], [0.5, 0.25, 0.125, 0.125]]))
    hidden = jnp.eye(2)[None]
    targets, mask = jnp.array([[0, 1]]), jnp.array([[1, 1]])

    def objective(w):
        out = fused_cross_entropy_sum(hidden, w, targets, mask, z_loss_weight=0.5, chunk_tokens=1)
        return out["objective"], out

    (value, out), grad = jax.value_and_grad(objective, has_aux=True)(w)
    np.testing.assert_allclose(value, 3.7334947, rtol=1e-6)
    np.testing.assert_allclose(out["loss"], 2.7725887, rtol=1e-6)
    np.testing.assert_allclose(out["z_loss"], 1.9218120, rtol=1e-6)
    expected = [[-0.4034264, 0.5965736, 0.5965736, 0.5965736], [0.5, -0.75, 0.125, 0.125]]
    np.testing.assert_allclose(grad, expected, atol=1e-6)


@pytest.mark.slow
def test_fused_masked_non_finite_position_has_zero_gradient(tiny):
    _, hidden_fn, _, params, batch = tiny
    hidden, w = hidden_fn(params, batch)
    hidden = hidden.at[3, 7].set(jnp.nan)  # row 3 is fully masked

    def objective(h):
        return fused_cross_entropy_sum(h, w, batch["targets"], batch["loss_mask"], chunk_tokens=40)[
            "objective"
        ]

    value, grad = jax.value_and_grad(objective)(hidden)
    assert np.isfinite(float(value))
    np.testing.assert_array_equal(np.asarray(grad[3], np.float32), 0.0)
    np.testing.assert_array_equal(np.asarray(grad[1, 5:], np.float32), 0.0)
    assert np.all(np.isfinite(np.asarray(grad, np.float32)))


@pytest.mark.slow
def test_chunked_token_logprobs_equal_log_softmax_with_gradients(tiny):
    dtype, hidden_fn, apply_fn, params, batch = tiny
    weights = jnp.asarray(np.linspace(-1.0, 2.0, ROWS * LENGTH).reshape(ROWS, LENGTH), jnp.float32)

    def chunked(p):
        hidden, w = hidden_fn(p, batch)
        return chunked_token_logprobs(hidden, w, batch["targets"], chunk_tokens=40)

    def direct(p):
        logprobs = jax.nn.log_softmax(apply_fn(p, batch).astype(jnp.float32), axis=-1)
        return jnp.take_along_axis(logprobs, batch["targets"][..., None], axis=-1)[..., 0]

    np.testing.assert_allclose(jax.jit(chunked)(params), jax.jit(direct)(params), atol=2e-5)
    if dtype == "float32":
        grads_c = jax.grad(lambda p: jnp.sum(weights * chunked(p)))(params)
        grads_d = jax.grad(lambda p: jnp.sum(weights * direct(p)))(params)
        for a, b in zip(jax.tree.leaves(grads_c), jax.tree.leaves(grads_d)):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
