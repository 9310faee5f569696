"""Measured matmul peak of this machine: the denominator of the CPU MFU figures in BENCHMARKS.md.

    python -m benchmarks.peak [--size 2048 --repeats 10 --shape M,K,N]

Times a jitted `[n, n] @ [n, n]` (2 n^3 FLOPs) for float32, bfloat16 inputs accumulated in float32, and
bfloat16 in and out, and reports the best of `repeats` calls in GFLOP/s. The best (not the median) is the
peak: it is the most this machine's XLA CPU backend delivered on a large, cache-friendly matmul.
`--shape M,K,N` times `[M, K] @ [K, N]` in float32 instead and also prints the median minor page faults
per call: each call writes a fresh `[M, N]` output, which the kernel faults in 4 KiB at a time unless the C
library backs it with huge pages (e.g. `--shape 1024,256,32000`, bench-18m's lm_head; BENCHMARKS.md).
"""

import argparse
import resource
import statistics
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


def matmul_rate(m: int, k: int, n: int, precision: str = "float32", repeats: int = 10) -> tuple[float, float]:
    """(best-of-`repeats` GFLOP/s, median minor page faults per call) of one jitted `[m, k] @ [k, n]`.

    Raises:
      ValueError: unknown `precision` (see `PRECISIONS`) or a dimension or `repeats` < 1.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {sorted(PRECISIONS)}")
    if min(m, k, n, repeats) < 1:
        raise ValueError(f"shape {m}x{k}x{n} and repeats={repeats} must all be >= 1")
    in_dtype, out_dtype = PRECISIONS[precision]
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((m, k)), in_dtype)
    b = jnp.asarray(rng.standard_normal((k, n)), in_dtype)
    matmul = jax.jit(lambda x, y: jnp.matmul(x, y, preferred_element_type=out_dtype))
    matmul(a, b).block_until_ready()
    best, faults = float("inf"), []
    for _ in range(repeats):
        faults_before, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
        matmul(a, b).block_until_ready()
        best = min(best, time.perf_counter() - start)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before)
    return 2 * m * k * n / best / 1e9, statistics.median(faults)


def matmul_gflops(precision: str = "float32", size: int = 2048, repeats: int = 10) -> float:
    """Best-of-`repeats` throughput of one `[size, size]` matmul in GFLOP/s (1 multiply-add = 2 FLOPs).

    Raises:
      ValueError: unknown `precision` (see `PRECISIONS`) or `size`/`repeats` < 1.
    """
    return matmul_rate(size, size, size, precision, repeats)[0]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--shape", default="", help="M,K,N: time [M, K] @ [K, N] in float32 instead")
    args = parser.parse_args(argv)
    if args.size < 1 or args.repeats < 1:
        parser.error(f"--size={args.size} and --repeats={args.repeats} must both be >= 1")
    if args.shape:
        try:
            m, k, n = (int(v) for v in args.shape.split(","))
            if min(m, k, n) < 1:
                raise ValueError
        except ValueError:
            parser.error(
                f"--shape={args.shape!r} must be three positive integers M,K,N (e.g. 1024,256,32000)"
            )
        gflops, faults = matmul_rate(m, k, n, "float32", args.repeats)
        print(f"matmul [{m},{k}]x[{k},{n}] float32 gflops={gflops:.1f} minor_faults/call={faults:.0f}")
        return
    print(f"backend={jax.default_backend()} devices={jax.device_count()} size={args.size}")
    for precision in PRECISIONS:
        print(f"matmul_peak {precision} gflops={matmul_gflops(precision, args.size, args.repeats):.1f}")


if __name__ == "__main__":
    main()
