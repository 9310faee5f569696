"""Steady-state train-step throughput (tokens/s) and MFU of a model preset, with the trainer's real step.

    python -m benchmarks.train_step --config=bench-18m-apertus [--steps 15 --warmup 3 --batch 4 --seq 256
        --dtype float32 --optimizer adamw --peak_gflops 0 --vocab_size 0 --json]

The step is exactly what the training loop runs: `apertus_jax.train.assemble.Run.train_step` (parameters +
optimizer state sharded by the model's logical-axis rules over the local devices, loss, gradient, global-norm
clip, AdamW or AdEMAMix update, skip-if-non-finite; jitted with in/out shardings and the state donated). The batch is one document per
row (positions 0..T-1, segment 1, full loss mask), the same work as the MaxText and transformers peers;
token ids are random because the step's cost does not depend on their values.

Throughput is the median over `--steps` timed steps after `--warmup` untimed ones (the first compiles).
`cpu_ms` (process CPU time per step, all threads) is printed too: on a shared, oversubscribed machine it
tracks the work done by the step far more stably than the wall time does. `sys_ms` is its kernel part and
`minor_faults` the page faults per step, `temp_mib` the compiled step's temporaries
(`memory_analysis().temp_size_in_bytes`): XLA:CPU faults them in afresh at every step, 4 KiB at a time,
unless the C library backs them with huge pages (BENCHMARKS.md, "Page faults").
MFU = tokens/s x training FLOPs per token (`apertus_jax.models.flops`, docs/recipe.md section 10) / peak, where the
peak is the float32 matmul peak measured now by `benchmarks.peak` (or `--peak_gflops`).
"""

import argparse
import json
import resource
import statistics
import time

import jax
import numpy as np

from apertus_jax.models import flops
from apertus_jax.models.presets import PRESET_NAMES, model_section
from apertus_jax.train.assemble import Run, step_config
from apertus_jax.train.sharding import batch_sharding
from benchmarks import peak

# Optimizer settings of the peers (MaxText defaults: AdamW b2 0.95, decay 0.1, clip 1.0); the values do not
# change the cost of a step.
OPTIMIZER_KWARGS = {"adamw": dict(b1=0.9, b2=0.95), "ademamix": dict(b1=0.9, b2=0.999, b3=0.9999, alpha=8.0)}


def synthetic_batch(batch: int, seq: int, vocab_size: int, seed: int = 0) -> dict[str, np.ndarray]:
    """One full-length document per row: `tokens`, `targets`, `positions`, `segment_ids`, `loss_mask` int32 `[B, T]`."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab_size, (batch, seq + 1), dtype=np.int32)
    ones = np.ones((batch, seq), np.int32)
    return {
        "tokens": ids[:, :-1],
        "targets": ids[:, 1:],
        "positions": np.broadcast_to(np.arange(seq, dtype=np.int32), (batch, seq)).copy(),
        "segment_ids": ones,
        "loss_mask": ones,
    }


def build(config_name: str, batch: int, seq: int, dtype: str, optimizer: str, **model_overrides):
    """The loop's jitted train step (`apertus_jax.train.assemble.Run`), its initial (params, opt_state) and
    a device batch, on all local devices.

    Raises:
      ValueError: unknown preset/optimizer, or `batch` not divisible by the device count.
    """
    if optimizer not in OPTIMIZER_KWARGS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {sorted(OPTIMIZER_KWARGS)}")
    if batch % jax.device_count():
        raise ValueError(f"--batch={batch} must be divisible by the {jax.device_count()} devices")
    model = model_section(config_name, dtype=dtype, max_seq_len=seq, **model_overrides)
    # A constant LR of 1e-4 (WSD without warmup or cooldown), decay 0.1, clip 1.0: MaxText's defaults.
    optim = dict(
        name=optimizer,
        peak_lr=1e-4,
        warmup_tokens=0,
        decay_tokens=0,
        weight_decay=0.1,
        clip_norm=1.0,
        **OPTIMIZER_KWARGS[optimizer],
    )
    run = Run(step_config(model, seq_len=seq, rows=batch, steps=1, optim=optim))
    state = run.spec.init()
    device_batch = jax.device_put(
        synthetic_batch(batch, seq, run.model_config.vocab_size), batch_sharding(run.mesh)
    )
    return run.model_config, run.train_step(batch).fn, state, device_batch


def measure(
    config_name: str,
    steps: int = 15,
    warmup: int = 3,
    batch: int = 4,
    seq: int = 256,
    dtype: str = "float32",
    optimizer: str = "adamw",
    peak_gflops: float = 0.0,
    **model_overrides,
) -> dict:
    """Runs the benchmark; returns a dict with tokens_per_s (median), step_ms, mfu, peak_gflops, loss, ...

    Raises:
      ValueError: `steps` < 1 or `warmup` < 1 (the first step compiles and must not be timed).
    """
    if steps < 1 or warmup < 1:
        raise ValueError(f"--steps={steps} and --warmup={warmup} must both be >= 1")
    model_config, step, state, device_batch = build(
        config_name, batch, seq, dtype, optimizer, **model_overrides
    )
    params, opt_state = state["params"], state["opt_state"]
    compile_start = time.perf_counter()
    # One compilation, timed as part of the first step; its executable also gives the temporaries' size.
    compiled = step.lower(params, opt_state, device_batch).compile()
    temp_bytes = compiled.memory_analysis().temp_size_in_bytes
    times, cpu_times, sys_times, faults = [], [], [], []
    for i in range(warmup + steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        usage_start = resource.getrusage(resource.RUSAGE_SELF)
        params, opt_state, metrics = compiled(params, opt_state, device_batch)
        jax.block_until_ready((params, opt_state, metrics))
        elapsed = time.perf_counter() - start
        usage = resource.getrusage(resource.RUSAGE_SELF)
        if i == 0:
            compile_s = time.perf_counter() - compile_start
        if i >= warmup:
            times.append(elapsed)
            cpu_times.append(time.process_time() - cpu_start)
            sys_times.append(usage.ru_stime - usage_start.ru_stime)
            faults.append(usage.ru_minflt - usage_start.ru_minflt)
    step_s = statistics.median(times)
    tokens_per_s = batch * seq / step_s
    flops_per_token = flops.train_flops_per_token(model_config, seq)
    peak_gflops = peak_gflops or peak.matmul_gflops("float32")
    return {
        "config": config_name,
        "dtype": dtype,
        "optimizer": optimizer,
        "batch": batch,
        "seq": seq,
        "devices": jax.device_count(),
        "tokens_per_s": tokens_per_s,
        "step_ms": 1e3 * step_s,
        "step_ms_min": 1e3 * min(times),
        "cpu_ms": 1e3 * statistics.median(cpu_times),
        "sys_ms": 1e3 * statistics.median(sys_times),
        "minor_faults": statistics.median(faults),
        "temp_mib": temp_bytes / 2**20,
        "steps": steps,
        "first_step_s": compile_s,
        "train_flops_per_token": flops_per_token,
        "achieved_gflops": tokens_per_s * flops_per_token / 1e9,
        "peak_gflops": peak_gflops,
        "mfu": tokens_per_s * flops_per_token / (peak_gflops * 1e9),
        "loss": float(metrics["loss"]),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", default="bench-18m-apertus", help="model preset (apertus_jax.models.presets)"
    )
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--optimizer", default="adamw", choices=sorted(OPTIMIZER_KWARGS))
    parser.add_argument(
        "--peak_gflops", type=float, default=0.0, help="0: measure the float32 matmul peak now"
    )
    parser.add_argument(
        "--vocab_size", type=int, default=0, help="0: the preset's; else this vocabulary (same body)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line instead of text")
    args = parser.parse_args(argv)
    if args.vocab_size < 0:
        parser.error(f"--vocab_size={args.vocab_size} must be >= 0 (0 keeps the preset's vocabulary)")
    if args.steps < 1 or args.warmup < 1:
        parser.error(
            f"--steps={args.steps} and --warmup={args.warmup} must both be >= 1 (the first step compiles)"
        )
    if args.config not in PRESET_NAMES:
        parser.error(f"--config={args.config!r} is not a model preset; choose from {', '.join(PRESET_NAMES)}")
    overrides = {"vocab_size": args.vocab_size} if args.vocab_size else {}
    try:
        result = measure(
            args.config,
            args.steps,
            args.warmup,
            args.batch,
            args.seq,
            args.dtype,
            args.optimizer,
            args.peak_gflops,
            **overrides,
        )
    except ValueError as err:
        raise SystemExit(f"error: {err}") from err
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"ours {result['config']} {result['dtype']} {result['optimizer']} B={args.batch} T={args.seq}: "
        f"tokens_per_s={result['tokens_per_s']:.0f} step_ms={result['step_ms']:.1f} "
        f"(median of {args.steps}) cpu_ms={result['cpu_ms']:.1f} sys_ms={result['sys_ms']:.1f} "
        f"minor_faults/step={result['minor_faults']:.0f} temporaries={result['temp_mib']:.0f}MiB achieved={result['achieved_gflops']:.1f} GFLOP/s "
        f"peak={result['peak_gflops']:.1f} GFLOP/s mfu={100 * result['mfu']:.1f}% "
        f"first_step={result['first_step_s']:.1f}s loss={result['loss']:.3f}"
    )


if __name__ == "__main__":
    main()
