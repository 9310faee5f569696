"""One layer's attention, forward and backward, through each kernel with the packed-document mask: time per
call, temporaries and error against the float32 reference, on one accelerator.

    python -m benchmarks.attention_kernels [--preset apertus-8b --seq 4096 --rows 1 --max_document N
        --kernels xla,cudnn_mask,... --json PATH] [--dry_run]

Kernels (q/k/v in bf16, the preset's head counts, scale `head_dim ** -0.5`):
  xla           `apertus_jax.models.attention.xla_attention` with the document mask (the "xla" kernel)
  cudnn_mask    `jax.nn.dot_product_attention(implementation="cudnn")` with the boolean document mask, which
                jax hands to cuDNN as a dense `[B, 1, T, T]` bias (the model's "cudnn" kernel)
  cudnn_causal  cuDNN causal only (`is_causal=True`): no document boundaries, so not the rule; the floor
                the document mask's cost is measured against
  cudnn_packed  jax's internal cuDNN wrapper (`jax._src.cudnn.fused_attention_stablehlo`, private API) in its
                packed layout: per row the documents' start offsets `[B, M + 1]` and lengths `[B, M]`, M the
                most documents in any row of this batch, causal within each document (Hopper and later)
Rows pack demo-corpus document lengths, the last ~5% padding (`benchmarks.packed_rows`).
Time: median of `--calls` blocked calls of the jitted gradient of `sum(out * cotangent)` with respect to q, k
and v (forward and backward), after two warm-up calls. Error: max |x - reference| over the real (non-padding)
positions divided by max |reference|, for the output and dq/dk/dv; the reference is `xla_attention` on the same
bf16 values in float32 (block by block, `blocked_xla_attention`, above 8,192 tokens per row). A kernel that fails to build or run is reported with its error's first line, and the
others still run. `--dry_run` runs the xla kernel at tiny sizes on any backend (CPU CI).
"""

import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from jax._src.cudnn import fused_attention_stablehlo as cudnn  # private: the packed layout (module docstring)

from apertus_jax.models.attention import attention_mask, blocked_xla_attention, xla_attention
from apertus_jax.models.presets import PRESET_NAMES, get_config
from benchmarks.packed_rows import packed_layout, packed_segment_ids
from experiments import cli

KERNELS = ("xla", "cudnn_mask", "cudnn_causal", "cudnn_packed")
# Above this many tokens per row the float32 reference is computed block by block (its T x T scores would not
# fit on one device).
BLOCKED_REFERENCE_ABOVE = 8192

_PRESET = flags.DEFINE_enum("preset", "apertus-8b", PRESET_NAMES, "model preset whose head counts are used")
_SEQ = flags.DEFINE_integer("seq", 4096, "tokens per row")
_ROWS = flags.DEFINE_integer("rows", 1, "rows of the batch")
_MAX_DOCUMENT = flags.DEFINE_integer("max_document", 0, "cap of a document's length; 0: seq / 3")
_KERNELS = flags.DEFINE_list("kernels", list(KERNELS), "kernels to run, of " + ", ".join(KERNELS))
_CALLS = flags.DEFINE_integer("calls", 20, "timed calls per kernel")
_JSON = flags.DEFINE_string("json", "", "also write the results as JSON to this path")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "the xla kernel at tiny sizes (any backend)")


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


def main(argv) -> None:
    del argv
    if _DRY_RUN.value:
        report = run("tiny", 256, 2, 2, kernels=("xla",))
    else:
        report = run(
            _PRESET.value, _SEQ.value, _ROWS.value, _CALLS.value, _KERNELS.value, _MAX_DOCUMENT.value
        )
    for name, r in report["kernels"].items():
        if "error" in r:
            print(f"{name:13s} failed: {r['error']}")
        else:
            errors = " ".join(f"{k}={v:.2g}" for k, v in r["relative_error"].items())
            print(f"{name:13s} {r['ms']:8.3f} ms fwd+bwd  temporaries {r['temp_gb']:.3f} GB  error {errors}")
    if _JSON.value:
        with open(_JSON.value, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    cli.run(main)
