"""Grouped-query self-attention with QK-norm, RoPE and packed-document masking (docs/recipe.md sections 1 and 2).

Mask rule: query i may attend key j iff `j <= i` (causal by index within the row) and
`segment_ids[i] == segment_ids[j]`. Padding (segment 0) thus attends only to earlier padding, so no softmax
row is ever empty in any kernel (no NaN, no -inf-only rows); the attention output at padding positions is
then set to zero, so padding contributes nothing and receives nothing through attention. Real tokens never
see padding or other documents.

Kernels behind `ModelConfig.attention_impl` (all take q `[B, T, N, H]`, k/v `[B, T, K, H]`, N % K == 0):
  "xla"    -- einsum scores and softmax in float32 (float64 in a float64 model; CPU default).
  "jax_nn" -- `jax.nn.dot_product_attention(..., implementation="xla")` with the boolean mask.
  "cudnn"  -- the same call with `implementation="cudnn"` (GPU, bf16/fp16 inputs).
  "splash" -- the TPU Pallas splash kernel with `SegmentIds` and a causal mask (TPU backend only).

Context parallelism (a mesh "context" axis > 1, `partitioning.LOGICAL_AXIS_RULES["length"]`): q, k and v are
computed on each device's slice of the sequence; before the kernel, k, v and the key-side segment ids are
all-gathered over "context" (one all-gather per layer; its backward a reduce-scatter), while queries, the
mask rows and the output stay split by query position. The causal rule compares global indices, so the result
is the unsharded one; positions (RoPE) and Goldfish come with the batch and are untouched. The gathered K/V
of one layer are `2 * T * K * H` values per row, small next to the `T / context * T` scores of the "xla" and
"jax_nn" kernels (docs/long_context.md has the memory plan). The "splash" kernel runs per batch and head
shard but whole along the sequence (replicated over "context"): exact, without the memory saving.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import PartitionSpec as P

from apertus_jax.models.config import ModelConfig
from apertus_jax.models.fp8 import projection
from apertus_jax.models.layers import RMSNorm, normal_param, wide
from apertus_jax.models.partitioning import constrain, logical_to_spec

try:  # the Pallas TPU kernels ship with jax, but not every jaxlib build can import them
    from jax.experimental.pallas.ops.tpu import splash_attention as splash
except ImportError:
    splash = None

MASK_VALUE = float(jnp.finfo(jnp.float32).min)
# The splash kernel keeps a table of (query block, key block) pairs in the TPU core's scalar memory (SMEM): with
# its default 128-token blocks 64k-token rows compile, 262,144-token rows did not (an 8 MiB table against 1 MiB of
# SMEM on v5p, libtpu's refusal; docs/accelerators.md). Longer rows take larger blocks: at most this many a side,
# as the 64k rows have.
SPLASH_MAX_BLOCKS = 512
SPLASH_DEFAULT_BLOCK = 128  # the kernel's `BlockSizes.get_default()`
# Every block size of the kernel's `BlockSizes`: queries and keys, forward and both backward kernels.
SPLASH_BLOCK_FIELDS = ("block_q", "block_kv", "block_kv_compute", "block_q_dkv", "block_kv_dkv")
SPLASH_BLOCK_FIELDS += ("block_kv_dkv_compute", "block_q_dq", "block_kv_dq")


def attention_mask(segment_ids_BxT: jax.Array) -> jax.Array:
    """Boolean mask `[B, 1, T, T]` (query, key): causal AND same segment (padding = segment 0 among itself)."""
    t = segment_ids_BxT.shape[1]
    causal_TxT = jnp.tril(jnp.ones((t, t), dtype=jnp.bool_))
    same_BxTxT = segment_ids_BxT[:, :, None] == segment_ids_BxT[:, None, :]
    return (causal_TxT[None] & same_BxTxT)[:, None]


def xla_attention(q_BxTxNxH, k_BxSxKxH, v_BxSxKxH, mask_Bx1xTxS, scale: float) -> jax.Array:
    """Reference einsum attention; scores and softmax in `wide(q.dtype)` (float32, or float64 for a float64
    model), output in `q.dtype`, `[B, T, N, H]`."""
    b, t, n, h = q_BxTxNxH.shape
    k = k_BxSxKxH.shape[2]
    q_BxTxKxGxH = q_BxTxNxH.reshape(b, t, k, n // k, h)
    scores = jnp.einsum(
        "btkgh,bskh->bkgts", q_BxTxKxGxH, k_BxSxKxH, preferred_element_type=wide(q_BxTxNxH.dtype)
    )
    scores = jnp.where(mask_Bx1xTxS[:, :, None], scores * scale, MASK_VALUE)
    probs = jax.nn.softmax(scores, axis=-1).astype(v_BxSxKxH.dtype)
    out = jnp.einsum("bkgts,bskh->btkgh", probs, v_BxSxKxH)
    return out.reshape(b, t, n, h)


def blocked_xla_attention(
    q_BxTxNxH, k_BxSxKxH, v_BxSxKxH, segment_ids_BxT, scale: float, block: int, shards: int
) -> jax.Array:
    """`xla_attention` with the mask rule of `attention_mask`, one block of `block` query positions per
    sequence shard at a time (`jax.lax.map`, each block under `jax.checkpoint`): scores `[B, K, G, shards,
    block, S]` instead of `[B, K, G, T, S]`. `shards` is the "context" size; queries stay split over it.

    Raises:
      ValueError: `T` is not a multiple of `shards * block`.
    """
    b, t, n, h = q_BxTxNxH.shape
    kv = k_BxSxKxH.shape[2]
    if t % (shards * block):
        raise ValueError(
            f"attention_query_block={block}: the {t // shards} query positions per device are not a multiple "
            "of the block; choose a block that divides them"
        )
    m = t // (shards * block)

    def blocks(x):  # [B, T, ...] -> [m, B, shards, block, ...]: block i of every shard
        return jnp.moveaxis(x.reshape(x.shape[0], shards, m, block, *x.shape[2:]), 2, 0)

    q_blocks = constrain(blocks(q_BxTxNxH), (None, "batch", "length", None, "heads", "head_dim"))
    seg_blocks = constrain(blocks(segment_ids_BxT), (None, "batch", "length", None))
    index_blocks = constrain(blocks(jnp.arange(t, dtype=jnp.int32)[None]), (None, None, "length", None))
    key_index_S = jnp.arange(t, dtype=jnp.int32)

    @jax.checkpoint
    def one_block(args):
        q_BxCxQxNxH, seg_BxCxQ, index_1xCxQ = args
        q_r = q_BxCxQxNxH.reshape(b, shards, block, kv, n // kv, h)
        scores = jnp.einsum("bcqkgh,bskh->bkgcqs", q_r, k_BxSxKxH, preferred_element_type=wide(q_r.dtype))
        causal = index_1xCxQ[..., None] >= key_index_S
        same = seg_BxCxQ[..., None] == segment_ids_BxT[:, None, None, :]
        scores = jnp.where((causal & same)[:, None, None], scores * scale, MASK_VALUE)
        probs = jax.nn.softmax(scores, axis=-1).astype(v_BxSxKxH.dtype)
        out = jnp.einsum("bkgcqs,bskh->bcqkgh", probs, v_BxSxKxH)
        return out.reshape(b, shards, block, n, h)

    out_blocks = jax.lax.map(one_block, (q_blocks, seg_blocks, index_blocks))
    return jnp.moveaxis(out_blocks, 0, 2).reshape(b, t, n, h)


def jax_nn_attention(
    q_BxTxNxH, k_BxSxKxH, v_BxSxKxH, mask_Bx1xTxS, scale: float, implementation: str
) -> jax.Array:
    """`jax.nn.dot_product_attention` with the boolean mask ("xla" or "cudnn" implementation)."""
    return jax.nn.dot_product_attention(
        q_BxTxNxH, k_BxSxKxH, v_BxSxKxH, mask=mask_Bx1xTxS, scale=scale, implementation=implementation
    )


def mesh_platform() -> str:
    """The platform ("tpu", "gpu", "cpu") of the devices of the mesh being traced under (`jax.set_mesh`), else
    of the process's default backend: a compile-only TPU or GPU mesh in a CPU process is "tpu" or "gpu"."""
    device = jax.sharding.get_abstract_mesh().abstract_device
    return jax.default_backend() if device is None else device.platform


def splash_block(length: int) -> int:
    """The splash kernel's block size in tokens (queries and keys, forward and backward) for rows of `length`
    tokens: the kernel's default (`SPLASH_DEFAULT_BLOCK`), doubled until at most `SPLASH_MAX_BLOCKS` blocks cover the row.

    Raises:
      ValueError: `length` is not a multiple of that block (one line with the fix).
    """
    block = SPLASH_DEFAULT_BLOCK
    while length > SPLASH_MAX_BLOCKS * block:
        block *= 2
    if length % block:
        raise ValueError(
            f"splash attention over rows of {length} tokens needs data.seq_len a multiple of {block} (its block)"
        )
    return block


def splash_attention(
    q_BxTxNxH, k_BxSxKxH, v_BxSxKxH, segment_ids_BxT, scale: float, interpret: bool = False
) -> jax.Array:
    """TPU splash attention (Pallas) with a causal mask and segment ids; `T` a multiple of 128.

    Under a mesh (`jax.set_mesh`) the kernel runs per shard through `jax.shard_map`: batch split as the
    "batch" rule says, query and kv heads split over "tensor" only when both head counts divide (else both
    replicated, so every shard keeps whole GQA groups). `interpret=True` runs the kernel in the Pallas
    interpreter (any backend, slow; for tests).

    Raises:
      NotImplementedError: not on TPU devices (`mesh_platform`; and not `interpret`), or the kernel is not
        importable.
    """
    if mesh_platform() != "tpu" and not interpret:
        raise NotImplementedError(
            "attention_impl='splash' needs TPU devices; use 'xla'/'jax_nn' on CPU, 'cudnn' on GPU"
        )
    if splash is None:
        raise NotImplementedError("splash attention kernel not importable from this jax installation")

    def local_attention(q_BxTxNxH, k_BxSxKxH, v_BxSxKxH, segment_ids_BxT):
        t, n = q_BxTxNxH.shape[1], q_BxTxNxH.shape[2]
        mask = splash.MultiHeadMask([splash.CausalMask((t, t))] * n)
        block = splash_block(t)
        sizes = (
            None
            if block == SPLASH_DEFAULT_BLOCK
            else splash.BlockSizes(**dict.fromkeys(SPLASH_BLOCK_FIELDS, block))
        )
        kernel = splash.make_splash_mha(
            mask, block_sizes=sizes, head_shards=1, q_seq_shards=1, interpret=interpret
        )

        def one_row(q_NxTxH, k_KxTxH, v_KxTxH, seg_T):
            return kernel(q_NxTxH, k_KxTxH, v_KxTxH, segment_ids=splash.SegmentIds(q=seg_T, kv=seg_T))

        heads_first = lambda x: jnp.swapaxes(x, 1, 2)  # noqa: E731  [B, T, N, H] <-> [B, N, T, H]
        out_BxNxTxH = jax.vmap(one_row)(
            heads_first(q_BxTxNxH * scale),
            heads_first(k_BxSxKxH),
            heads_first(v_BxSxKxH),
            segment_ids_BxT.astype(jnp.int32),
        )
        return heads_first(out_BxNxTxH).astype(q_BxTxNxH.dtype)

    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return local_attention(q_BxTxNxH, k_BxSxKxH, v_BxSxKxH, segment_ids_BxT)
    mesh_shape = dict(mesh.shape)
    b, _, n, _ = q_BxTxNxH.shape
    batch = logical_to_spec(("batch",), (b,), mesh_shape)[0]
    kv_heads = logical_to_spec(("kv_heads",), (k_BxSxKxH.shape[2],), mesh_shape)[0]
    q_heads = logical_to_spec(("heads",), (n,), mesh_shape)[0]
    if kv_heads != q_heads:
        kv_heads = q_heads = None
    q_spec, kv_spec = P(batch, None, q_heads, None), P(batch, None, kv_heads, None)
    sharded = jax.shard_map(
        local_attention,
        mesh=mesh,
        in_specs=(q_spec, kv_spec, kv_spec, P(batch, None)),
        out_specs=q_spec,
        check_vma=False,
    )
    return sharded(q_BxTxNxH, k_BxSxKxH, v_BxSxKxH, segment_ids_BxT)


def _context_shards(length: int) -> int:
    """How many ways the "length" rule splits a sequence of `length` under the current mesh (1 without)."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return 1
    axes = logical_to_spec(("length",), (length,), dict(mesh.shape))[0]
    axes = () if axes is None else (axes,) if isinstance(axes, str) else axes
    return int(np.prod([dict(mesh.shape)[a] for a in axes]))


def dot_product_attention(
    q_BxTxNxH, k_BxSxKxH, v_BxSxKxH, segment_ids_BxT, impl: str, query_block: int = 0
) -> jax.Array:
    """Dispatch to kernel `impl` with the packed-document mask; padding rows of the output are zero.

    Shapes: q `[B, T, N, H]`, k/v `[B, T, K, H]`, segment_ids `[B, T]` int -> `[B, T, N, H]` in `q.dtype`.
    Scale `H ** -0.5`. Under a mesh with a "context" axis, k/v are all-gathered along T (module docstring).
    `query_block` > 0 (with "xla"): `blocked_xla_attention` once a device holds more query positions.
    """
    scale = q_BxTxNxH.shape[-1] ** -0.5
    if impl == "splash":
        out = splash_attention(q_BxTxNxH, k_BxSxKxH, v_BxSxKxH, segment_ids_BxT, scale)
    else:
        # Keys and values whole along the sequence (an all-gather over "context"; a no-op without one),
        # mask rows split like the queries.
        k_BxSxKxH = constrain(k_BxSxKxH, ("batch", None, "kv_heads", "head_dim"))
        v_BxSxKxH = constrain(v_BxSxKxH, ("batch", None, "kv_heads", "head_dim"))
        shards = _context_shards(q_BxTxNxH.shape[1])
        if impl == "xla" and query_block and q_BxTxNxH.shape[1] > shards * query_block:
            out = blocked_xla_attention(
                q_BxTxNxH, k_BxSxKxH, v_BxSxKxH, segment_ids_BxT, scale, query_block, shards
            )
            return jnp.where((segment_ids_BxT != 0)[:, :, None, None], out, jnp.zeros_like(out))
        mask = constrain(attention_mask(segment_ids_BxT), ("batch", None, "length", None))
        if impl == "xla":
            out = xla_attention(q_BxTxNxH, k_BxSxKxH, v_BxSxKxH, mask, scale)
        else:
            implementation = "cudnn" if impl == "cudnn" else "xla"
            out = jax_nn_attention(q_BxTxNxH, k_BxSxKxH, v_BxSxKxH, mask, scale, implementation)
    return jnp.where((segment_ids_BxT != 0)[:, :, None, None], out, jnp.zeros_like(out))


# Rotary position embedding of queries and keys: half-split ("rotate_half") layout, optional Llama-3.1
# scaling of the frequencies (docs/recipe.md section 1).
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
    `x * cos + rotate_half(x) * sin` with `rotate_half([x1, x2]) = [-x2, x1]`. Angles, cos and sin in float32
    (as `transformers` computes them whatever the model's dtype), the rotation in `wide(x.dtype)`, result in
    `x.dtype`. Positions may exceed `max_seq_len` and `original_max_position_embeddings`.
    """
    angles_BxTxh = positions_BxT.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)
    angles_BxTxH = jnp.concatenate([angles_BxTxh, angles_BxTxh], axis=-1)[:, :, None, :]
    x = x_BxTxNxH.astype(wide(x_BxTxNxH.dtype))
    x1, x2 = jnp.split(x, 2, axis=-1)
    rotated = jnp.concatenate([-x2, x1], axis=-1)
    return (
        x * jnp.cos(angles_BxTxH).astype(x.dtype) + rotated * jnp.sin(angles_BxTxH).astype(x.dtype)
    ).astype(x_BxTxNxH.dtype)


class Attention(nnx.Module):
    """Self-attention: q/k/v projections, per-head QK-norm, RoPE, masked attention, output projection.

    Kernels (no biases): `q_proj` `[d_model, n_heads, head_dim]` ("embed", "heads", "head_dim"),
    `k_proj`/`v_proj` `[d_model, n_kv_heads, head_dim]` ("embed", "kv_heads", "head_dim"),
    `o_proj` `[n_heads, head_dim, d_model]` ("heads", "head_dim", "embed"). `q_norm`/`k_norm` hold ONE
    `(head_dim,)` weight each, shared by all heads, applied before RoPE (absent when `qk_norm=False`).
    """

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        d, n, k, h, std = config.d_model, config.n_heads, config.n_kv_heads, config.head_dim, config.init_std
        self.config = config
        self.q_proj = normal_param(rngs, (d, n, h), ("embed", "heads", "head_dim"), std)
        self.k_proj = normal_param(rngs, (d, k, h), ("embed", "kv_heads", "head_dim"), std)
        self.v_proj = normal_param(rngs, (d, k, h), ("embed", "kv_heads", "head_dim"), std)
        self.o_proj = normal_param(rngs, (n, h, d), ("heads", "head_dim", "embed"), std)
        if config.qk_norm:
            self.q_norm = RMSNorm(h, config.rms_norm_eps, "head_dim")
            self.k_norm = RMSNorm(h, config.rms_norm_eps, "head_dim")
        else:
            self.q_norm = self.k_norm = None

    def __call__(self, x_BxTxD: jax.Array, positions_BxT: jax.Array, segment_ids_BxT: jax.Array) -> jax.Array:
        """x `[B, T, d_model]` (compute dtype), positions/segment_ids `[B, T]` int -> `[B, T, d_model]`."""
        q, k, v = self.project(x_BxTxD, positions_BxT)
        cfg = self.config
        out = dot_product_attention(q, k, v, segment_ids_BxT, cfg.attention_impl, cfg.attention_query_block)
        return self.output(out)

    def project(self, x_BxTxD: jax.Array, positions_BxT: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """q `[B, T, N, H]`, k and v `[B, T, K, H]` in compute dtype: projections, QK-norm, RoPE on q and k.

        Split from `__call__` so that the KV-cached decode (`apertus_jax.models.generate`) reuses it.
        """
        cfg = self.config
        dtype = jnp.dtype(cfg.dtype)
        x_BxTxD = x_BxTxD.astype(dtype)
        q = projection("btd,dnh->btnh", x_BxTxD, self.q_proj[...].astype(dtype), cfg.fp8)
        k = projection("btd,dkh->btkh", x_BxTxD, self.k_proj[...].astype(dtype), cfg.fp8)
        v = projection("btd,dkh->btkh", x_BxTxD, self.v_proj[...].astype(dtype), cfg.fp8)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        inv_freq = rope_inv_freq(cfg)
        q = constrain(apply_rope(q, positions_BxT, inv_freq), ("batch", "length", "heads", "head_dim"))
        k = constrain(apply_rope(k, positions_BxT, inv_freq), ("batch", "length", "kv_heads", "head_dim"))
        v = constrain(v, ("batch", "length", "kv_heads", "head_dim"))
        return q, k, v

    def output(self, out_BxTxNxH: jax.Array) -> jax.Array:
        """Output projection of the attention result `[B, T, N, H]` -> `[B, T, d_model]` (compute dtype)."""
        dtype = jnp.dtype(self.config.dtype)
        return projection("btnh,nhd->btd", out_BxTxNxH, self.o_proj[...].astype(dtype), self.config.fp8)
