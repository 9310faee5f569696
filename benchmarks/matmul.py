"""Measured matmul rates of this machine: the peak is the denominator of the CPU MFU figures.

The train-step reports of benchmarks/reports/ show them (e.g. 2026-12-01-train-step-quiet-machine.md).

`peak_report` gives the lines of `python -m benchmarks.peak`; `matmul_gflops` is the peak that
`benchmarks.compare`, `benchmarks.head_share` and `benchmarks.train_step` measure at their start.
"""

import resource
import statistics
import time
from collections.abc import Iterator

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


def parse_shape(shape: str) -> tuple[int, int, int]:
    """`"M,K,N"` -> (M, K, N).

    Raises:
      ValueError: not three positive integers.
    """
    parts = [part.strip() for part in shape.split(",")]
    if len(parts) != 3 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise ValueError(f"--shape={shape!r} must be three positive integers M,K,N (e.g. 1024,256,32000)")
    m, k, n = (int(part) for part in parts)
    return m, k, n


def peak_report(size: int = 2048, repeats: int = 10, shape: str = "") -> Iterator[str]:
    """The lines of `python -m benchmarks.peak`, each yielded once measured: the backend, then the peak of
    each of `PRECISIONS` on a `[size, size]` matmul; with `shape` ("M,K,N") instead one line with the float32
    rate of `[M, K] @ [K, N]` and its median minor page faults per call.

    Raises:
      ValueError (at the first line, before anything is measured): `size` or `repeats` < 1, or a `shape`
        that is not three positive integers.
    """
    if size < 1 or repeats < 1:
        raise ValueError(f"--size={size} and --repeats={repeats} must both be >= 1")
    if shape:
        m, k, n = parse_shape(shape)
        gflops, faults = matmul_rate(m, k, n, "float32", repeats)
        yield f"matmul [{m},{k}]x[{k},{n}] float32 gflops={gflops:.1f} minor_faults/call={faults:.0f}"
        return
    yield f"backend={jax.default_backend()} devices={jax.device_count()} size={size}"
    for precision in PRECISIONS:
        yield f"matmul_peak {precision} gflops={matmul_gflops(precision, size, repeats):.1f}"
