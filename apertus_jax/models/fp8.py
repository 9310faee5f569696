"""FP8 projections (opt-in `ModelConfig.fp8`): e4m3 inputs and weights, e5m2 gradients, current scaling.

Each operand is scaled per tensor so that its largest magnitude maps to the format's maximum (448 for
float8_e4m3fn, 57344 for float8_e5m2) and rounded to FP8; the matmul takes the FP8 operands themselves,
accumulates in float32 and multiplies the product of the two scales back (`fp8_dot`). Handed FP8 operands,
XLA:GPU makes every projection an FP8 GEMM on Hopper (H100/H200) and newer: a cuBLASLt call
(`__cublas$lt$matmul$f8`) where its Triton GEMMs are off (`xla_gpu_enable_triton_gemm=false`), else a Triton
GEMM fusion over the float8 operands. Dequantizing before the matmul instead (`convert(fp8) * scale` in float32,
then the compute dtype) left bf16 GEMMs in the H100 program. Other backends compute the same FP8 products
exactly in float32, so the numerics can be checked on CPU (tests/models/test_fp8.py documents the tolerances).
The backward pass rounds the incoming gradient to e5m2 (wider range, as in the NVIDIA Transformer Engine recipe
"HYBRID") and multiplies it with the e4m3 operands of the forward pass, which it keeps as residuals (one byte
per element).

Apertus measured +26% throughput from FP8 but instability after ~300B tokens (report, appendix D;
docs/recipe.md section 10): bf16 stays the default.
"""

import functools

import jax
import jax.numpy as jnp

E4M3, E5M2 = jnp.float8_e4m3fn, jnp.float8_e5m2


def quantize(x: jax.Array, fp8_dtype) -> tuple[jax.Array, jax.Array]:
    """(`x` / scale rounded to `fp8_dtype`, scale): the per-tensor scale is amax / format max, a float32
    scalar without gradient (1 for a zero tensor, which stays zero)."""
    fmax = float(jnp.finfo(fp8_dtype).max)
    amax = jax.lax.stop_gradient(jnp.max(jnp.abs(x)).astype(jnp.float32))
    scale = jnp.where(amax > 0, amax / fmax, 1.0)
    return jnp.clip(x.astype(jnp.float32) / scale, -fmax, fmax).astype(fp8_dtype), scale


def quantize_dequantize(x: jax.Array, fp8_dtype) -> jax.Array:
    """`x` rounded to `fp8_dtype` with its per-tensor scale (`quantize`), returned in `x.dtype`: the values
    `fp8_einsum` multiplies."""
    q, scale = quantize(x, fp8_dtype)
    return (q.astype(jnp.float32) * scale).astype(x.dtype)


def fp8_dot(spec: str, a_q: jax.Array, a_scale: jax.Array, b_q: jax.Array, b_scale: jax.Array, dtype):
    """`einsum(spec, a_q, b_q)` of two FP8 operands accumulated in float32, times `a_scale * b_scale`, in
    `dtype`: the form XLA:GPU lowers to an FP8 GEMM (see the module docstring)."""
    product = jnp.einsum(spec, a_q, b_q, preferred_element_type=jnp.float32)
    return (product * (a_scale * b_scale)).astype(dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def fp8_einsum(spec: str, x: jax.Array, w: jax.Array) -> jax.Array:
    """`jnp.einsum(spec, x, w)` of both operands rounded to e4m3, in `x.dtype` (see the module docstring).

    Args:
      spec: a two-operand einsum spec, activation first (e.g. "btd,dnh->btnh"), whose every index of one
        operand is in the other or in the output (so the gradients are einsums too).
      x, w: activations and weights.
    """
    return _fwd(spec, x, w)[0]


def _fwd(spec, x, w):
    (qx, sx), (qw, sw) = quantize(x, E4M3), quantize(w, E4M3)
    # a zero-size array of w's dtype: the dtype of its gradient (residuals are arrays)
    return fp8_dot(spec, qx, sx, qw, sw, x.dtype), (qx, sx, qw, sw, jnp.zeros((0,), w.dtype))


def _bwd(spec, residuals, g):
    qx, sx, qw, sw, w_dtype = residuals
    inputs, out = spec.split("->")
    x_axes, w_axes = inputs.split(",")
    qg, sg = quantize(g, E5M2)
    dx = fp8_dot(f"{out},{w_axes}->{x_axes}", qg, sg, qw, sw, g.dtype)
    dw = fp8_dot(f"{x_axes},{out}->{w_axes}", qx, sx, qg, sg, w_dtype.dtype)
    return dx, dw


fp8_einsum.defvjp(_fwd, _bwd)


def projection(spec: str, x: jax.Array, w: jax.Array, fp8: bool) -> jax.Array:
    """`jnp.einsum(spec, x, w)`, through `fp8_einsum` when `fp8`."""
    return fp8_einsum(spec, x, w) if fp8 else jnp.einsum(spec, x, w)
