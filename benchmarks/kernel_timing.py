"""One layer's attention, forward and backward, through each kernel with the packed-document mask: time per
call, temporaries and error against the float32 reference (the measurement of `benchmarks.attention_kernels`,
whose docstring describes the kernels and the figures).

    report = run("apertus-8b", seq=4096, rows=1, calls=20, kernels=KERNELS, max_document=4096)
"""

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.cudnn import fused_attention_stablehlo as cudnn  # private: the packed layout (module docstring)

from apertus_jax.models.attention import attention_mask, blocked_xla_attention, xla_attention
from apertus_jax.models.presets import get_config
from benchmarks.packed_rows import packed_layout, packed_segment_ids

KERNELS = ("xla", "cudnn_mask", "cudnn_causal", "cudnn_packed")
# Above this many tokens per row the float32 reference is computed block by block (its T x T scores would not
# fit on one device).
BLOCKED_REFERENCE_ABOVE = 8192


def kernel_fn(name: str, segment_ids_BxT: np.ndarray, scale: float):
    """`attention(q, k, v) -> out [B, T, N, H]` of kernel `name` for these segment ids."""
    segment_ids = jnp.asarray(segment_ids_BxT)
    if name == "xla":
        return lambda q, k, v: xla_attention(q, k, v, attention_mask(segment_ids), scale)
    if name == "cudnn_mask":
        return lambda q, k, v: jax.nn.dot_product_attention(
            q, k, v, mask=attention_mask(segment_ids), scale=scale, implementation="cudnn"
        )
    if name == "cudnn_causal":
        return lambda q, k, v: jax.nn.dot_product_attention(
            q, k, v, is_causal=True, scale=scale, implementation="cudnn"
        )
    offsets, lengths = (jnp.asarray(a) for a in packed_layout(segment_ids_BxT))
    return lambda q, k, v: cudnn.dot_product_attention(
        q,
        k,
        v,
        q_seqlen=lengths,
        kv_seqlen=lengths,
        q_offsets=offsets,
        kv_offsets=offsets,
        scale=scale,
        mask_type=cudnn.MaskType.PADDING_CAUSAL,
    )


def measure(name: str, q, k, v, cotangent, segment_ids_BxT: np.ndarray, reference: dict, calls: int) -> dict:
    """Time, temporaries and errors of kernel `name` (module docstring)."""
    attention = kernel_fn(name, segment_ids_BxT, q.shape[-1] ** -0.5)

    def loss(q, k, v):
        return (attention(q, k, v).astype(jnp.float32) * cotangent).sum()

    step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))
    compiled = step.lower(q, k, v).compile()
    forward = jax.jit(attention)
    times = []
    for i in range(2 + calls):
        start = time.perf_counter()
        jax.block_until_ready(compiled(q, k, v))
        if i >= 2:
            times.append(time.perf_counter() - start)
    out = forward(q, k, v)
    _, grads = compiled(q, k, v)
    real = np.asarray(segment_ids_BxT > 0)[:, :, None, None]
    errors = {}
    for key, value in zip(("out", "dq", "dk", "dv"), (out, *grads)):
        value, ref = np.asarray(value, np.float32), reference[key]
        errors[key] = float(np.abs(np.where(real, value - ref, 0)).max() / np.abs(ref).max())
    return {
        "ms": 1e3 * statistics.median(times),
        "temp_gb": compiled.memory_analysis().temp_size_in_bytes / 1e9,
        "relative_error": errors,
    }


def run(preset: str, seq: int, rows: int, calls: int, kernels=KERNELS, max_document: int = 0) -> dict:
    """Every kernel of `kernels` on one batch of rows packed with documents of at most `max_document` tokens
    (0: seq / 3); a failing kernel's entry is `{"error": first line}`.

    Raises:
      ValueError: a kernel name not in `KERNELS`.
    """
    unknown = sorted(set(kernels) - set(KERNELS))
    if unknown:
        raise ValueError(f"--kernels: unknown {', '.join(unknown)}; choose from {', '.join(KERNELS)}")
    model = get_config(preset)
    shapes = (model.n_heads, model.n_kv_heads, model.n_kv_heads)
    keys = jax.random.split(jax.random.key(0), 4)
    q, k, v = (
        jax.random.normal(key, (rows, seq, n, model.head_dim), jnp.float32).astype(jnp.bfloat16)
        for key, n in zip(keys[:3], shapes)
    )
    cotangent = jax.random.normal(keys[3], q.shape, jnp.float32)
    segment_ids = packed_segment_ids(rows, seq, max_document)
    f32 = [x.astype(jnp.float32) for x in (q, k, v)]
    scale = model.head_dim**-0.5
    if seq > BLOCKED_REFERENCE_ABOVE:
        reference_attention = jax.jit(
            lambda q, k, v: blocked_xla_attention(
                q, k, v, jnp.asarray(segment_ids), scale, block=1024, shards=1
            )
        )
    else:
        reference_attention = kernel_fn("xla", segment_ids, scale)
    out_ref, vjp = jax.vjp(reference_attention, *f32)
    reference = {
        key: np.asarray(value, np.float32)
        for key, value in zip(("out", "dq", "dk", "dv"), (out_ref, *vjp(cotangent)))
    }
    report = {
        "device_kind": jax.devices()[0].device_kind,
        "jax": jax.__version__,
        "preset": preset,
        "heads": model.n_heads,
        "kv_heads": model.n_kv_heads,
        "head_dim": model.head_dim,
        "seq": seq,
        "rows": rows,
        "max_document": max_document or seq // 3,
        "documents_per_row": int(segment_ids.max()),
        "kernels": {},
    }
    for name in kernels:
        try:
            report["kernels"][name] = measure(name, q, k, v, cotangent, segment_ids, reference, calls)
        except Exception as err:  # noqa: BLE001 -- reported per kernel; the others still run
            report["kernels"][name] = {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"}
    return report
