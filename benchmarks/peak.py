"""Measured matmul peak of this machine: the denominator of the CPU MFU figures in BENCHMARKS.md.

    python -m benchmarks.peak [--size 2048 --repeats 10]

Times a jitted `[n, n] @ [n, n]` (2 n^3 FLOPs) for float32, bfloat16 inputs accumulated in float32, and
bfloat16 in and out, and reports the best of `repeats` calls in GFLOP/s. The best (not the median) is the
peak: it is the most this machine's XLA CPU backend delivered on a large, cache-friendly matmul.
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

# name -> (input dtype, preferred_element_type)
PRECISIONS = {
    "float32": (jnp.float32, jnp.float32),
    "bf16->f32": (jnp.bfloat16, jnp.float32),
    "bf16": (jnp.bfloat16, jnp.bfloat16),
}


def matmul_gflops(precision: str = "float32", size: int = 2048, repeats: int = 10) -> float:
    """Best-of-`repeats` throughput of one `[size, size]` matmul in GFLOP/s (1 multiply-add = 2 FLOPs).

    Raises:
      ValueError: unknown `precision` (see `PRECISIONS`) or `size`/`repeats` < 1.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {sorted(PRECISIONS)}")
    if size < 1 or repeats < 1:
        raise ValueError(f"size={size} and repeats={repeats} must be >= 1")
    in_dtype, out_dtype = PRECISIONS[precision]
    rng = np.random.default_rng(0)
    a, b = (jnp.asarray(rng.standard_normal((size, size)), in_dtype) for _ in range(2))
    matmul = jax.jit(lambda x, y: jnp.matmul(x, y, preferred_element_type=out_dtype))
    matmul(a, b).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(a, b).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    print(f"backend={jax.default_backend()} devices={jax.device_count()} size={args.size}")
    for precision in PRECISIONS:
        print(f"matmul_peak {precision} gflops={matmul_gflops(precision, args.size, args.repeats):.1f}")


if __name__ == "__main__":
    main()
