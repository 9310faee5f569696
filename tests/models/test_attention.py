import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from apertus_jax.models import attention
from apertus_jax.models.attention import attention_mask, dot_product_attention, splash_attention
from apertus_jax.models.partitioning import make_mesh


def _naive_attention(q, k, v, segment_ids):
    """Loop reference in float64: query i sees keys j <= i of its own segment; padding outputs are zero."""
    b, t, n, h = q.shape
    group = n // k.shape[2]
    out = np.zeros((b, t, n, h))
    for bi in range(b):
        for i in range(t):
            if segment_ids[bi, i] == 0:
                continue
            keys = [j for j in range(i + 1) if segment_ids[bi, j] == segment_ids[bi, i]]
            for head in range(n):
                kv = head // group
                s = np.array([q[bi, i, head] @ k[bi, j, kv] for j in keys]) / np.sqrt(h)
                p = np.exp(s - s.max())
                out[bi, i, head] = (p / p.sum()) @ v[bi, keys, kv]
    return out


def _inputs(t, n=4, k=2, h=16, seed=0):
    rng = np.random.default_rng(seed)
    q, key, v = (rng.normal(size=(2, t, heads, h)).astype(np.float32) for heads in (n, k, k))
    segment_ids = np.zeros((2, t), np.int32)
    segment_ids[0, : t // 3], segment_ids[0, t // 3 : t - 5] = 1, 2  # two documents, then padding
    segment_ids[1, :] = 1 + (np.arange(t) >= t // 2)  # two documents, no padding
    return q, key, v, segment_ids


def test_mask_is_causal_same_segment():
    seg = jnp.array([[1, 1, 2, 2, 0, 0]])
    mask = np.asarray(attention_mask(seg))[0, 0]
    expected = np.array(
        [
            [1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [0, 0, 1, 0, 0, 0],
            [0, 0, 1, 1, 0, 0],
            [0, 0, 0, 0, 1, 0],  # padding only sees earlier padding (never an empty softmax row)
            [0, 0, 0, 0, 1, 1],
        ],
        bool,
    )
    np.testing.assert_array_equal(mask, expected)


@pytest.mark.slow
@pytest.mark.parametrize("impl", ["xla", "jax_nn"])
def test_cpu_kernels_match_naive_reference(impl):
    q, k, v, seg = _inputs(12)
    out = dot_product_attention(*(jnp.asarray(a) for a in (q, k, v, seg)), impl=impl)
    np.testing.assert_allclose(np.asarray(out), _naive_attention(q, k, v, seg), atol=2e-6)


@pytest.mark.slow
def test_splash_kernel_matches_xla_in_pallas_interpreter():
    q, k, v, seg = (jnp.asarray(a) for a in _inputs(128, h=64))
    reference = dot_product_attention(q, k, v, seg, impl="xla")
    out = splash_attention(q, k, v, seg, scale=64**-0.5, interpret=True)
    out = jnp.where((seg != 0)[:, :, None, None], out, 0.0)
    np.testing.assert_allclose(np.asarray(out), np.asarray(reference), atol=2e-6)


@pytest.mark.slow
def test_splash_kernel_under_a_mesh_runs_per_shard():
    q, k, v, seg = (jnp.asarray(np.concatenate([a, a[::-1]])) for a in _inputs(128, h=64))  # batch 4
    reference = dot_product_attention(q, k, v, seg, impl="xla")
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    with jax.set_mesh(mesh):
        out = jax.jit(functools.partial(splash_attention, scale=64**-0.5, interpret=True))(q, k, v, seg)
    assert tuple(out.sharding.spec)[:3] == (("data", "fsdp"), None, "tensor")  # 4 batch x 2 head shards
    out = jnp.where((seg != 0)[:, :, None, None], out, 0.0)
    np.testing.assert_allclose(np.asarray(out), np.asarray(reference), atol=2e-6)


@pytest.mark.parametrize("length, block", [(4096, 128), (65536, 128), (131072, 256), (262144, 512)])
def test_splash_blocks_grow_past_64k_tokens_so_the_block_table_fits_smem(length, block):
    assert attention.splash_block(length) == block
    assert length // block <= attention.SPLASH_MAX_BLOCKS


def test_a_row_that_splash_blocks_do_not_divide_is_refused_in_one_line():
    with pytest.raises(ValueError, match="needs data.seq_len a multiple of 256") as info:
        attention.splash_block(65536 + 128)
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_splash_kernel_with_larger_blocks_matches_xla(monkeypatch):
    """The block sizes reach the kernel: one 256-token block a side (as 262,144-token rows get 512-token
    blocks) gives the XLA reference's result in the Pallas interpreter."""
    monkeypatch.setattr(attention, "SPLASH_MAX_BLOCKS", 1)
    made, make = [], attention.splash.make_splash_mha
    monkeypatch.setattr(
        attention.splash, "make_splash_mha", lambda *a, **kw: made.append(kw) or make(*a, **kw)
    )
    q, k, v, seg = (jnp.asarray(a) for a in _inputs(256, h=64))
    reference = dot_product_attention(q, k, v, seg, impl="xla")
    out = splash_attention(q, k, v, seg, scale=64**-0.5, interpret=True)
    sizes = made[0]["block_sizes"]
    assert {sizes.block_q, sizes.block_kv, sizes.block_q_dkv, sizes.block_kv_dkv, sizes.block_q_dq} == {256}
    out = jnp.where((seg != 0)[:, :, None, None], out, 0.0)
    np.testing.assert_allclose(np.asarray(out), np.asarray(reference), atol=2e-6)


def test_splash_on_cpu_raises_clear_error():
    q, k, v, seg = (jnp.asarray(a) for a in _inputs(128, h=64))
    with pytest.raises(NotImplementedError, match="needs TPU devices"):
        dot_product_attention(q, k, v, seg, impl="splash")


def test_cudnn_is_rejected_on_cpu_not_silently_replaced():
    if jax.default_backend() == "gpu":
        pytest.skip("cudnn runs here; covered by the GPU check")
    q, k, v, seg = (jnp.asarray(a) for a in _inputs(8))
    # without cuDNN: "cuDNN is not detected"; with the `accelerators` extra's cuDNN: its float32 inputs refused
    with pytest.raises((RuntimeError, ValueError), match="cuDNN|Unsupported dtype"):
        dot_product_attention(q, k, v, seg, impl="cudnn")


@pytest.mark.slow
def test_fully_padded_row_has_finite_output_and_gradients():
    q, k, v, seg = (jnp.asarray(a) for a in _inputs(8))
    seg = seg.at[0].set(0)
    for impl in ("xla", "jax_nn"):
        fn = functools.partial(dot_product_attention, segment_ids_BxT=seg, impl=impl)
        out = jax.jit(fn)(q, k, v)
        np.testing.assert_array_equal(np.asarray(out[0]), 0.0)
        assert np.isfinite(np.asarray(out)).all()
        grads = jax.jit(jax.grad(lambda *a: jnp.sum(jnp.sin(fn(*a))), argnums=(0, 1, 2)))(q, k, v)
        assert all(np.isfinite(np.asarray(g)).all() for g in grads)


@pytest.mark.slow
@pytest.mark.parametrize("context", [1, 2, 4])
def test_query_blocks_match_the_naive_reference_and_whole_attention(context):
    """Blocks of 4 queries per context shard: the loop reference's output, and the gradients of all-at-once
    attention, with and without a context axis splitting the 32 positions."""
    q, k, v, seg = _inputs(32)
    naive = _naive_attention(q, k, v, seg)
    loss = lambda fn: lambda *a: jnp.sum(jnp.sin(fn(*a)))  # noqa: E731
    whole = functools.partial(dot_product_attention, segment_ids_BxT=jnp.asarray(seg), impl="xla")
    blocked = functools.partial(whole, query_block=4)
    args = tuple(jnp.asarray(a) for a in (q, k, v))
    grads_whole = jax.jit(jax.grad(loss(whole), argnums=(0, 1, 2)))(*args)
    mesh = make_mesh(
        1, 2 if context < 4 else 1, 1, jax.devices()[: 2 * context if context < 4 else 4], context
    )
    with jax.set_mesh(mesh):
        out = jax.jit(blocked)(*args)
        grads = jax.jit(jax.grad(loss(blocked), argnums=(0, 1, 2)))(*args)
    np.testing.assert_allclose(np.asarray(out), naive, atol=2e-6)
    for g, g_whole in zip(grads, grads_whole):
        np.testing.assert_allclose(np.asarray(g), np.asarray(g_whole), atol=1e-5)
    with pytest.raises(ValueError, match="not a multiple of the block"):
        jax.jit(functools.partial(whole, query_block=5))(*args)
