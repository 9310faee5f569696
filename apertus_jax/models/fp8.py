"""FP8 projections (opt-in `ModelConfig.fp8`): e4m3 inputs and weights, e5m2 gradients, current scaling.

Each operand is scaled per tensor so that its largest magnitude maps to the format's maximum (448 for
float8_e4m3fn, 57344 for float8_e5m2), rounded to FP8, and multiplied back by its scale before the matmul
(quantize-dequantize). XLA:GPU rewrites `dot(convert(fp8) * scale, convert(fp8) * scale)` into a cuBLASLt FP8
GEMM on Hopper (H100/H200) and newer; other backends run the same rounding with bf16/f32 matmuls, so the
numerics can be checked on CPU (tests/models/test_fp8.py documents the tolerances). The backward pass rounds
the incoming gradient to e5m2 (wider range, as in the NVIDIA Transformer Engine recipe "HYBRID") and reuses
the e4m3 operands of the forward pass.

Apertus measured +26% throughput from FP8 but instability after ~300B tokens (report, appendix D;
docs/recipe.md section 10): bf16 stays the default.
"""

import functools

import jax
import jax.numpy as jnp

E4M3, E5M2 = jnp.float8_e4m3fn, jnp.float8_e5m2


def quantize_dequantize(x: jax.Array, fp8_dtype) -> jax.Array:
    """`x` rounded to `fp8_dtype` with a per-tensor scale (amax / format max), returned in `x.dtype`.

    A zero tensor stays zero (scale 1). The scale is a float32 scalar without gradient.
    """
    fmax = float(jnp.finfo(fp8_dtype).max)
    amax = jax.lax.stop_gradient(jnp.max(jnp.abs(x)).astype(jnp.float32))
    scale = jnp.where(amax > 0, amax / fmax, 1.0)
    q = jnp.clip(x.astype(jnp.float32) / scale, -fmax, fmax).astype(fp8_dtype)
    return (q.astype(jnp.float32) * scale).astype(x.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def fp8_einsum(spec: str, x: jax.Array, w: jax.Array) -> jax.Array:
    """`jnp.einsum(spec, x, w)` with both operands rounded to e4m3 (see the module docstring).

    Args:
      spec: a two-operand einsum spec, activation first (e.g. "btd,dnh->btnh").
      x, w: activations and weights in the compute dtype; the result has that dtype.
    """
    return jnp.einsum(spec, quantize_dequantize(x, E4M3), quantize_dequantize(w, E4M3))


def _fwd(spec, x, w):
    qx, qw = quantize_dequantize(x, E4M3), quantize_dequantize(w, E4M3)
    return jnp.einsum(spec, qx, qw), (qx, qw)


def _bwd(spec, residuals, g):
    qx, qw = residuals
    _, vjp = jax.vjp(lambda a, b: jnp.einsum(spec, a, b), qx, qw)
    return vjp(quantize_dequantize(g.astype(qx.dtype), E5M2))


fp8_einsum.defvjp(_fwd, _bwd)


def projection(spec: str, x: jax.Array, w: jax.Array, fp8: bool) -> jax.Array:
    """`jnp.einsum(spec, x, w)`, through `fp8_einsum` when `fp8`."""
    return fp8_einsum(spec, x, w) if fp8 else jnp.einsum(spec, x, w)
