"""Packed-segment attention parity: a fused kernel against the XLA einsum reference, values and gradients.

    python -m benchmarks.attention_parity [--impl cudnn] [--seq 2048] [--dry_run]

The known bug class: a fused attention kernel that ignores the segment ids of packed documents (or the
causal mask) and lets a token attend to another document. Rows pack documents whose lengths are those of
consecutive demo-corpus documents (`apertus_jax.data.demo_corpus`, UTF-8 byte lengths), then padding.
Checks, in bf16 (the kernel's dtype) against the XLA reference computed from the same bf16 inputs:
  (1) outputs and q/k/v gradients agree within bf16 tolerance (max abs difference <= 0.02 x max |reference|);
  (2) isolation: shifting the values of the first document by 64 (and scaling its keys) moves the outputs
      of the other documents by no more than the bf16 tolerance of (1) (a leaking kernel moves them by O(64)).
Exit status 1 with one line naming the failed check; 0 prints "PASS ...". `--dry_run` (CPU CI) runs the
`jax_nn` implementation at seq 256.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from apertus_jax.models.attention import dot_product_attention
from benchmarks.packed_rows import packed_segment_ids
from experiments import cli

_IMPL = flags.DEFINE_enum(
    "impl", "cudnn", ["cudnn", "jax_nn", "splash"], "the fused kernel checked against XLA"
)
_SEQ = flags.DEFINE_integer("seq", 2048, "tokens per row")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "jax_nn at seq 256 (any backend)")


def check(impl: str, seq: int, heads: int = 8, kv_heads: int = 2, head_dim: int = 128) -> str:
    """Runs both checks; returns the PASS line.

    Raises:
      AssertionError: a check failed (the message names it and the measured difference).
    """
    rows = 2
    segment_ids = jnp.asarray(packed_segment_ids(rows, seq))
    keys = jax.random.split(jax.random.key(0), 4)
    q, k, v = (
        jax.random.normal(key, (rows, seq, n, head_dim), jnp.float32).astype(jnp.bfloat16)
        for key, n in zip(keys[:3], (heads, kv_heads, kv_heads))
    )
    cotangent = jax.random.normal(keys[3], (rows, seq, heads, head_dim), jnp.bfloat16)

    def run(name):
        fn = jax.jit(lambda q, k, v: dot_product_attention(q, k, v, segment_ids, impl=name))
        out, vjp = jax.vjp(fn, q, k, v)
        return fn, out, vjp(cotangent)

    fused_fn, out, grads = run(impl)
    _, out_ref, grads_ref = run("xla")
    for name, a, b in (("output", out, out_ref), *zip(("dq", "dk", "dv"), grads, grads_ref)):
        a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
        diff, scale = float(np.abs(a - b).max()), float(np.abs(b).max())
        assert diff <= 0.02 * scale, f"{impl} vs xla: {name} max abs diff {diff:.4g} > 0.02 x {scale:.4g}"
    first = np.asarray(segment_ids == 1)[:, :, None, None]
    k2, v2 = jnp.where(first, 4 * k, k), jnp.where(first, v + 64, v)
    changed = np.asarray(fused_fn(q, k2, v2), np.float32)
    others = np.broadcast_to(np.asarray(segment_ids > 1)[:, :, None, None], changed.shape)
    leaked = float(np.abs(changed - np.asarray(out, np.float32))[others].max())
    # A kernel that lets other documents see document 1 moves their outputs by O(64); bf16 re-association
    # of the unchanged terms by at most a few ulps.
    bound = 0.02 * float(np.abs(np.asarray(out, np.float32)).max())
    assert leaked <= bound, (
        f"{impl}: outputs of other documents moved by {leaked:.4g} > {bound:.3g} (segment ids ignored?)"
    )
    n_docs = int(segment_ids.max())
    return f"PASS {impl} vs xla: seq {seq}, {rows} rows, up to {n_docs} documents per row, bf16 on {jax.devices()[0].device_kind}"


def main(argv) -> None:
    del argv
    impl, seq = ("jax_nn", 256) if _DRY_RUN.value else (_IMPL.value, _SEQ.value)
    try:
        print(check(impl, seq))
    except AssertionError as err:
        print(f"FAIL {err}", file=sys.stderr)
        raise SystemExit(1) from err


if __name__ == "__main__":
    cli.execute(main)
