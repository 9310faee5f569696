"""Steady-state train-step throughput (tokens/s) and MFU of a model preset, with the trainer's real step.

    python -m benchmarks.train_step --config=bench-18m-apertus [--steps 15 --warmup 3 --batch 4 --seq 256
        --dtype float32 --optimizer adamw --peak_gflops 0 --vocab_size 0 --json]

The step is exactly what the training loop runs (`apertus_jax.train.run.Run.train_step`) on one
full-length document per row, the same work as the MaxText and transformers peers (`benchmarks.step`).
Throughput is the median over `--steps` timed steps after `--warmup` untimed ones (the first compiles).
`cpu_ms` (process CPU time per step, all threads) is printed too: on a shared, oversubscribed machine it
tracks the work done by the step far more stably than the wall time does. `sys_ms` is its kernel part and
`minor_faults` the page faults per step, `temp_mib` the compiled step's temporaries
(`memory_analysis().temp_size_in_bytes`): XLA:CPU faults them in afresh at every step, 4 KiB at a time,
unless the C library backs them with huge pages (benchmarks/reports/2026-12-01-page-faults.md).
MFU = tokens/s x training FLOPs per token (`apertus_jax.models.flops`, docs/recipe.md section 10) / peak, where the
peak is the float32 matmul peak measured now by `benchmarks.matmul` (or `--peak_gflops`).
"""

import json

from absl import flags

from benchmarks import step
from experiments import cli

_CONFIG = flags.DEFINE_string("config", "bench-18m-apertus", "model preset (apertus_jax.models.presets)")
_STEPS = flags.DEFINE_integer("steps", 15, "timed steps")
_WARMUP = flags.DEFINE_integer("warmup", 3, "untimed steps first (the first compiles)")
_BATCH = flags.DEFINE_integer("batch", 4, "rows per step")
_SEQ = flags.DEFINE_integer("seq", 256, "tokens per row")
_DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "compute dtype")
_OPTIMIZER = flags.DEFINE_enum("optimizer", "adamw", sorted(step.OPTIMIZER_KWARGS), "optimizer")
_PEAK_GFLOPS = flags.DEFINE_float("peak_gflops", 0.0, "0: measure the float32 matmul peak now")
_VOCAB_SIZE = flags.DEFINE_integer("vocab_size", 0, "0: the preset's; else this vocabulary (same body)")
_JSON = flags.DEFINE_bool("json", False, "print one JSON line instead of text")


def main(argv) -> None:
    del argv
    result = step.measure(
        _CONFIG.value,
        _STEPS.value,
        _WARMUP.value,
        _BATCH.value,
        _SEQ.value,
        _DTYPE.value,
        _OPTIMIZER.value,
        _PEAK_GFLOPS.value,
        _VOCAB_SIZE.value,
    )
    if _JSON.value:
        print(json.dumps(result))
        return
    print(
        f"ours {result['config']} {result['dtype']} {result['optimizer']} B={result['batch']} T={result['seq']}: "
        f"tokens_per_s={result['tokens_per_s']:.0f} step_ms={result['step_ms']:.1f} "
        f"(median of {result['steps']}) cpu_ms={result['cpu_ms']:.1f} sys_ms={result['sys_ms']:.1f} "
        f"minor_faults/step={result['minor_faults']:.0f} temporaries={result['temp_mib']:.0f}MiB achieved={result['achieved_gflops']:.1f} GFLOP/s "
        f"peak={result['peak_gflops']:.1f} GFLOP/s mfu={100 * result['mfu']:.1f}% "
        f"first_step={result['first_step_s']:.1f}s loss={result['loss']:.3f}"
    )


if __name__ == "__main__":
    cli.execute(main)
