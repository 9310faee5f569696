"""Which XLA:CPU operations give other bits on another processor: a fingerprint of each op's result.

    python -m benchmarks.cpu_ops                                   # this processor, XLA's defaults
    qemu-x86_64 -cpu Haswell-v4 $(which python) -m benchmarks.cpu_ops   # an emulated Intel processor
    XLA_FLAGS="..." python -m benchmarks.cpu_ops                   # under other XLA flags

Prints one JSON object {op: the first 12 hex digits of the sha256 of its float32 result}: the dots of the demo
model's shapes (forward and weight-gradient contractions), the reductions of a loss and of a gradient norm, and
the elementwise functions of the model and the optimizer. The same fingerprint on two processors means the op
gives the same bits there; `tools.measure.portability` compares them across emulated processors
(docs/results.md, "Across processor kinds"). The inputs are fixed draws of a seeded generator, float32.
"""

import hashlib
import json

import jax
import jax.numpy as jnp
import numpy as np

# (M, K, N) of the demo model's matmuls: a projection, the lm_head and its input gradient (K = vocabulary),
# weight gradients (K = the 2,048 tokens of a step).
DOT_SHAPES = ((128, 128, 128), (2048, 128, 4096), (256, 4096, 128), (128, 2048, 128), (384, 2048, 128))


def _fingerprint(x: jax.Array) -> str:
    return hashlib.sha256(np.asarray(x, dtype=np.float32).tobytes()).hexdigest()[:12]


def fingerprints() -> dict[str, str]:
    """{op name: fingerprint} of each op on its fixed inputs, each op jitted on its own."""
    rng = np.random.default_rng(0)
    found = {}
    for m, k, n in DOT_SHAPES:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        found[f"dot_{m}x{k}x{n}"] = _fingerprint(jax.jit(jnp.dot)(a, b))
    flat = rng.standard_normal(1_000_003, dtype=np.float32)
    rows_TxD = rng.standard_normal((2048, 128), dtype=np.float32)
    positive_TxD = np.abs(rows_TxD) + 0.5
    # (fn, input): the input is an argument, not a constant, so the compiled kernel runs (not XLA's folder)
    ops = {
        "sum_1m": (jnp.sum, flat),
        "sum_of_squares_1m": (lambda x: jnp.sum(jnp.square(x)), flat),
        "sum_over_tokens": (lambda x: x.sum(axis=0), rows_TxD),
        "logsumexp_rows": (lambda x: jax.nn.logsumexp(x, axis=-1), rows_TxD),
        "exp": (jnp.exp, rows_TxD),
        "log": (jnp.log, positive_TxD),
        "tanh": (jnp.tanh, rows_TxD),
        "expm1": (jnp.expm1, rows_TxD),
        "rsqrt": (jax.lax.rsqrt, positive_TxD),
        "sqrt_divide": (lambda x: x / (jnp.sqrt(x) + 1e-8), positive_TxD),
        "power": (lambda x: jnp.power(0.999, x * 100), positive_TxD),
    }
    for name, (fn, x) in ops.items():
        found[name] = _fingerprint(jax.jit(fn)(x))
    return found


if __name__ == "__main__":
    print(json.dumps(fingerprints()))
