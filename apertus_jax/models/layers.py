"""Building blocks without attention: parameters with logical axes, RMSNorm, xIELU, MLP (docs/recipe.md section 1).

Every parameter is an `nnx.Param` whose metadata `logical_axes` names its dimensions (e.g. `("embed", "mlp")`);
`apertus_jax.models.partitioning` maps those names to mesh axes. Plain metadata (not `out_sharding`) keeps
the model constructible without any mesh.
"""

import functools

import jax
import jax.numpy as jnp
from flax import nnx

from apertus_jax.models.config import ModelConfig
from apertus_jax.models.fp8 import fp8_einsum
from apertus_jax.models.partitioning import constrain

XIELU_BETA = 0.5
XIELU_EPS = -1e-6
# softplus^-1(0.8) and softplus^-1(0.8 - beta): alpha_p = alpha_n = 0.8 at init (docs/recipe.md section 1).
XIELU_A_P_INIT = 0.20338237
XIELU_A_N_INIT = -1.0502256


def normal_param(
    rngs: nnx.Rngs, shape: tuple[int, ...], logical_axes: tuple[str | None, ...], std: float
) -> nnx.Param:
    """A float32 `nnx.Param` drawn from N(0, std^2), tagged with `logical_axes` (one name per dimension)."""
    return nnx.Param(std * jax.random.normal(rngs.params(), shape, jnp.float32), logical_axes=logical_axes)


def constant_param(value: float, shape: tuple[int, ...], logical_axes: tuple[str | None, ...]) -> nnx.Param:
    """A float32 `nnx.Param` filled with `value`, tagged with `logical_axes`."""
    return nnx.Param(jnp.full(shape, value, jnp.float32), logical_axes=logical_axes)


def wide(dtype) -> jnp.dtype:
    """The dtype of the model's sensitive math (norms, softmax, RoPE, logits) for compute dtype `dtype`:
    float32, or float64 for a float64 model (a reference run, docs/usage.md)."""
    return jnp.promote_types(dtype, jnp.float32)


def rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    """`weight * x / sqrt(mean(x^2, -1) + eps)` computed in `wide(x.dtype)`, returned in `x.dtype`."""
    x_wide = x.astype(wide(x.dtype))
    y = x_wide * jax.lax.rsqrt(jnp.mean(jnp.square(x_wide), axis=-1, keepdims=True) + eps)
    return (weight.astype(x_wide.dtype) * y).astype(x.dtype)


class RMSNorm(nnx.Module):
    """RMSNorm over the last axis with a ones-initialised weight of shape `(dim,)` (docs/recipe.md section 1)."""

    def __init__(self, dim: int, eps: float, logical_axis: str):
        self.weight = constant_param(1.0, (dim,), (logical_axis,))
        self.eps = eps

    def __call__(self, x: jax.Array) -> jax.Array:
        """x: `[..., dim]` any float dtype -> same shape and dtype."""
        return rms_norm(x, self.weight[...], self.eps)


def xielu(x: jax.Array, a_p: jax.Array, a_n: jax.Array) -> jax.Array:
    """xIELU (Huang & Schlag 2025; docs/recipe.md section 1; HF `XIELUActivation`), elementwise in `x.dtype`.

    `alpha_p = softplus(a_p)`, `alpha_n = beta + softplus(a_n)`;
    `f(x) = alpha_p x^2 + beta x` for x > 0, else `alpha_n (expm1(min(x, eps)) - x) + beta x`,
    with beta = 0.5, eps = -1e-6. `a_p`, `a_n` are the raw (pre-softplus) trainable scalars.
    """
    alpha_p = jax.nn.softplus(a_p.astype(wide(x.dtype))).astype(x.dtype)
    alpha_n = (XIELU_BETA + jax.nn.softplus(a_n.astype(wide(x.dtype)))).astype(x.dtype)
    positive = alpha_p * x * x + XIELU_BETA * x
    negative = alpha_n * (jnp.expm1(jnp.minimum(x, XIELU_EPS)) - x) + XIELU_BETA * x
    return jnp.where(x > 0, positive, negative)


class XIELU(nnx.Module):
    """xIELU activation with per-layer trainable scalars `a_p`, `a_n` (each a `(1,)` parameter)."""

    def __init__(self):
        self.a_p = constant_param(XIELU_A_P_INIT, (1,), (None,))
        self.a_n = constant_param(XIELU_A_N_INIT, (1,), (None,))

    def __call__(self, x: jax.Array) -> jax.Array:
        return xielu(x, self.a_p[...], self.a_n[...])


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _dense_cpu(x, w, preferred_element_type):
    return jnp.einsum("...d,df->...f", x, w, preferred_element_type=preferred_element_type)


def _dense_cpu_fwd(x, w, preferred_element_type):
    return _dense_cpu(x, w, preferred_element_type), (x, w)


def _dense_cpu_bwd(preferred_element_type, residuals, g):
    # XLA:CPU lowers the weight gradient x^T @ g by writing g transposed: for the MLP it recomputes the whole
    # elementwise backward of the activation (xIELU / SwiGLU) a second time in a cache-hostile column order,
    # for the lm_head it copies the [tokens, vocab] logit gradient. A materialized x^T (the barrier keeps XLA
    # from folding the transpose back into the dot) avoids both: a ~30% faster bench-18m train step on CPU
    # (benchmarks/reports/2026-11-30-train-step-bench-18m.md). Where the input is the wider operand (the MLP's
    # down projection: [N, mlp_hidden] in, [N, d_model] out) transposing g and the small [out, in] product moves
    # under half the bytes of transposing x: the MLP's backward takes ~25% less CPU time
    # (benchmarks/reports/2026-12-01-train-step-quiet-machine.md). Same products; float32 sums in another order.
    del preferred_element_type
    x, w = residuals
    dx = jnp.einsum("...f,df->...d", g, w).astype(x.dtype)
    x_NxD, g_NxF = x.reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1])
    if x_NxD.shape[1] <= g_NxF.shape[1]:
        x_DxN = jax.lax.optimization_barrier(x_NxD.T)
        return dx, (x_DxN @ g_NxF).astype(w.dtype)
    g_FxN = jax.lax.optimization_barrier(g_NxF.T)
    return dx, jnp.transpose(g_FxN @ x_NxD).astype(w.dtype)


_dense_cpu.defvjp(_dense_cpu_fwd, _dense_cpu_bwd)


def dense(x: jax.Array, w: jax.Array, preferred_element_type=None) -> jax.Array:
    """`x @ w` over the last axis of x: `[..., in]` x `[in, out]` -> `[..., out]`.

    Result dtype: that of the inputs, or `preferred_element_type` (e.g. float32 logits from bf16 inputs).
    On the CPU backend the gradient is a custom VJP with the same math (see `_dense_cpu_bwd`); elsewhere a
    plain einsum, so GPU/TPU fusion and remat policies see an ordinary dot.
    """
    if jax.default_backend() == "cpu":
        return _dense_cpu(x, w, preferred_element_type)
    return jnp.einsum("...d,df->...f", x, w, preferred_element_type=preferred_element_type)


class MLP(nnx.Module):
    """Feed-forward block: ungated `down(xIELU(up(x)))` or gated SwiGLU `down(silu(gate(x)) * up(x))`.

    Kernels are `[in, out]`: `up`/`gate` `[d_model, mlp_hidden]` ("embed", "mlp"), `down`
    `[mlp_hidden, d_model]` ("mlp", "embed"). No biases. Matmuls run in `config.dtype` (FP8 inputs when
    `config.fp8`, `apertus_jax.models.fp8`).
    """

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        d, f, std = config.d_model, config.mlp_hidden, config.init_std
        self.dtype = jnp.dtype(config.dtype)
        self.fp8 = config.fp8
        self.up = normal_param(rngs, (d, f), ("embed", "mlp"), std)
        if config.mlp_type == "swiglu":
            self.gate = normal_param(rngs, (d, f), ("embed", "mlp"), std)
            self.act = None
        else:
            self.gate = None
            self.act = XIELU()
        self.down = normal_param(rngs, (f, d), ("mlp", "embed"), std)

    def __call__(self, x_BxTxD: jax.Array) -> jax.Array:
        """x: `[B, T, d_model]` in compute dtype -> `[B, T, d_model]` in compute dtype."""
        x_BxTxD = x_BxTxD.astype(self.dtype)
        matmul = functools.partial(fp8_einsum, "...d,df->...f") if self.fp8 else dense
        up_BxTxF = matmul(x_BxTxD, self.up[...].astype(self.dtype))
        if self.gate is not None:
            gate_BxTxF = matmul(x_BxTxD, self.gate[...].astype(self.dtype))
            h_BxTxF = jax.nn.silu(gate_BxTxF) * up_BxTxF
        else:
            h_BxTxF = self.act(up_BxTxF)
        h_BxTxF = constrain(h_BxTxF, ("batch", "length", "mlp"))
        return matmul(h_BxTxF, self.down[...].astype(self.dtype))
