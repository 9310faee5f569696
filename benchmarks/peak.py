"""Measured matmul peak of this machine: the denominator of the CPU MFU figures.

The train-step reports of benchmarks/reports/ show them (e.g. 2026-12-01-train-step-quiet-machine.md).

    python -m benchmarks.peak [--size 2048 --repeats 10 --shape M,K,N]

Times a jitted `[n, n] @ [n, n]` (2 n^3 FLOPs) for float32, bfloat16 inputs accumulated in float32, and
bfloat16 in and out, and reports the best of `repeats` calls in GFLOP/s. The best (not the median) is the
peak: it is the most this machine's XLA CPU backend delivered on a large, cache-friendly matmul.
`--shape M,K,N` times `[M, K] @ [K, N]` in float32 instead and also prints the median minor page faults
per call: each call writes a fresh `[M, N]` output, which the kernel faults in 4 KiB at a time unless the C
library backs it with huge pages (e.g. `--shape 1024,256,32000`, bench-18m's lm_head;
benchmarks/reports/2026-12-01-page-faults.md).
The measurement is `benchmarks.matmul.peak_report`.
"""

from absl import flags

from benchmarks import matmul
from experiments import cli

_SIZE = flags.DEFINE_integer("size", 2048, "n of the [n, n] @ [n, n] matmul")
_REPEATS = flags.DEFINE_integer("repeats", 10, "timed calls; the best is reported")
_SHAPE = flags.DEFINE_string("shape", "", "M,K,N: time [M, K] @ [K, N] in float32 instead")


def main(argv) -> None:
    del argv
    for line in matmul.peak_report(_SIZE.value, _REPEATS.value, _SHAPE.value):
        print(line, flush=True)


if __name__ == "__main__":
    cli.execute(main)
