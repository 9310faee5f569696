"""The trainer's real train step on a synthetic batch, built and timed: the measurements of
`benchmarks.train_step` (a model preset, any backend) and `benchmarks.accelerator` (bf16 on GPU/TPU).

The step is exactly what the training loop runs: `apertus_jax.train.run.Run.train_step` (parameters +
optimizer state sharded by the model's logical-axis rules over the local devices, loss, gradient, global-norm
clip, AdamW or AdEMAMix update, skip-if-non-finite; jitted with in/out shardings and the state donated). The
batch is one document per row (positions 0..T-1, segment 1, full loss mask), the same work as the MaxText and
transformers peers; token ids are random because the step's cost does not depend on their values.
`build` gives that step to the other benchmarks (`benchmarks.checkpoint`, `benchmarks.profile`).
"""

import resource
import statistics
import time

import jax
import numpy as np

from apertus_jax.aot.target_plan import kernels
from apertus_jax.models import flops
from apertus_jax.models.presets import PRESET_NAMES, get_config
from apertus_jax.train.metrics import peak_flops_per_device
from apertus_jax.train.run import Run, run_config_for
from apertus_jax.train.train_state import batch_sharding
from benchmarks import matmul
from benchmarks.configs import ACCELERATOR_CONFIGS, DRY_RUN

# Optimizer settings of the peers (MaxText defaults: AdamW b2 0.95, decay 0.1, clip 1.0); the values do not
# change the cost of a step.
OPTIMIZER_KWARGS = {"adamw": dict(b1=0.9, b2=0.95), "ademamix": dict(b1=0.9, b2=0.999, b3=0.9999, alpha=8.0)}
# `measure_accelerator`'s fused attention per backend (XLA's einsums elsewhere).
ATTENTION_BY_BACKEND = {"gpu": "cudnn", "tpu": "splash"}


def peak_bytes_in_use() -> int:
    """The first local device's peak allocation so far in bytes, 0 where the backend keeps no statistics."""
    stats = jax.local_devices()[0].memory_stats() or {}
    return int(stats.get("peak_bytes_in_use", 0))


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
    """The loop's jitted train step (`apertus_jax.train.run.Run`), its initial (params, opt_state) and
    a device batch, on all local devices.

    Raises:
      ValueError: unknown preset/optimizer, or `batch` not divisible by the device count.
    """
    if optimizer not in OPTIMIZER_KWARGS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {sorted(OPTIMIZER_KWARGS)}")
    if batch % jax.device_count():
        raise ValueError(f"--batch={batch} must be divisible by the {jax.device_count()} devices")
    model = get_config(config_name, dtype=dtype, max_seq_len=seq, **model_overrides)
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
    run = Run(run_config_for(model, seq_len=seq, rows=batch, steps=1, optim=optim))
    state = run.spec.init()
    device_batch = jax.device_put(
        synthetic_batch(batch, seq, run.config.model.vocab_size), batch_sharding(run.mesh)
    )
    return run.config.model, run.train_step(batch).fn, state, device_batch


def measure(
    config_name: str,
    steps: int = 15,
    warmup: int = 3,
    batch: int = 4,
    seq: int = 256,
    dtype: str = "float32",
    optimizer: str = "adamw",
    peak_gflops: float = 0.0,
    vocab_size: int = 0,
    **model_overrides,
) -> dict:
    """Steady-state throughput of the step of preset `config_name` (module docstring).

    Throughput is the median over `steps` timed steps after `warmup` untimed ones (the first compiles).
    `cpu_ms` is the process CPU time per step (all threads): on a shared, oversubscribed machine it tracks the
    work done by the step far more stably than the wall time does. `sys_ms` is its kernel part and
    `minor_faults` the page faults per step, `temp_mib`, `argument_gb` and `output_gb` the compiled step's
    temporaries, arguments and outputs (`memory_analysis()`), `peak_gb` the first device's peak allocation
    of the process (`Device.memory_stats()`; 0 where the backend keeps none, as on CPU) and `kernels` the
    cuDNN/cuBLAS custom calls and Mosaic kernels of the program (`apertus_jax.aot.target_plan.kernels`). MFU = tokens/s x training FLOPs per token
    (`apertus_jax.models.flops`) / peak, where the peak is `peak_gflops`, or when 0 the float32 matmul peak
    measured now (`benchmarks.matmul`). `vocab_size` replaces the preset's vocabulary (0 keeps it; the body is
    unchanged); `model_overrides` are further `ModelConfig` fields.

    Returns:
      a dict with tokens_per_s (median), step_ms, cpu_ms, mfu, peak_gflops, loss, ...

    Raises:
      ValueError (before anything is built): `config_name` is not a model preset, `vocab_size` < 0, `steps`
        or `warmup` < 1 (the first step compiles and must not be timed); as `build`.
    """
    if config_name not in PRESET_NAMES:
        raise ValueError(
            f"--config={config_name!r} is not a model preset; choose from {', '.join(PRESET_NAMES)}"
        )
    if vocab_size < 0:
        raise ValueError(f"--vocab_size={vocab_size} must be >= 0 (0 keeps the preset's vocabulary)")
    if steps < 1 or warmup < 1:
        raise ValueError(f"--steps={steps} and --warmup={warmup} must both be >= 1 (the first step compiles)")
    if vocab_size:
        model_overrides["vocab_size"] = vocab_size
    model_config, step, state, device_batch = build(
        config_name, batch, seq, dtype, optimizer, **model_overrides
    )
    params, opt_state = state["params"], state["opt_state"]
    compile_start = time.perf_counter()
    # One compilation, timed as part of the first step; its executable also gives the temporaries' size.
    compiled = step.lower(params, opt_state, device_batch, None).compile()
    memory = compiled.memory_analysis()
    times, cpu_times, sys_times, faults = [], [], [], []
    for i in range(warmup + steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        usage_start = resource.getrusage(resource.RUSAGE_SELF)
        params, opt_state, metrics = compiled(params, opt_state, device_batch, None)
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
    peak_gflops = peak_gflops or matmul.matmul_gflops("float32")
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
        "temp_mib": memory.temp_size_in_bytes / 2**20,
        "argument_gb": memory.argument_size_in_bytes / 1e9,
        "output_gb": memory.output_size_in_bytes / 1e9,
        "peak_gb": peak_bytes_in_use() / 1e9,
        "kernels": kernels(compiled.as_text()),
        "steps": steps,
        "first_step_s": compile_s,
        "train_flops_per_token": flops_per_token,
        "achieved_gflops": tokens_per_s * flops_per_token / 1e9,
        "peak_gflops": peak_gflops,
        "mfu": tokens_per_s * flops_per_token / (peak_gflops * 1e9),
        "loss": float(metrics["loss"]),
    }


def accelerator_setup(
    config: str,
    dry_run: bool = False,
    batch_per_device: int = 0,
    seq: int = 0,
    remat: str = "dots_with_no_batch_dims_saveable",
    fp8: bool = False,
) -> tuple[str, int, int, dict]:
    """The step of config `config` of `ACCELERATOR_CONFIGS` on all local devices, as `measure_accelerator` and
    `benchmarks.profile` run it: (model preset, global batch in rows, tokens per row, `ModelConfig` overrides:
    the config's own, the backend's fused attention, scanned layers, the remat policy, fp8). `dry_run` gives the
    tiny widths of `DRY_RUN`; 0 keeps the config's batch per device / sequence length.

    Raises:
      ValueError: unknown config.
    """
    if config not in ACCELERATOR_CONFIGS:
        raise ValueError(f"unknown --config={config!r}; choose one of {sorted(ACCELERATOR_CONFIGS)}")
    spec = ACCELERATOR_CONFIGS[config]
    overrides = dict(spec["overrides"], fp8=fp8)
    if dry_run:
        spec = {**spec, **DRY_RUN}
        overrides.update(DRY_RUN["overrides"])
    overrides.update(
        attention_impl=ATTENTION_BY_BACKEND.get(jax.default_backend(), "xla"),
        scan_layers=True,
        remat_policy=remat,
    )
    batch = (batch_per_device or spec["batch_per_device"]) * jax.device_count()
    return spec["preset"], batch, seq or spec["seq"], overrides


def measure_accelerator(
    config: str,
    dry_run: bool = False,
    steps: int = 10,
    warmup: int = 3,
    batch_per_device: int = 0,
    seq: int = 0,
    remat: str = "dots_with_no_batch_dims_saveable",
    optimizer: str = "ademamix",
    fp8: bool = False,
) -> dict:
    """Measures config `config` of `ACCELERATOR_CONFIGS`; returns `measure`'s dict plus
    tokens_per_s_per_device, peak_tflops_per_device and attention_impl.

    Raises:
      ValueError: unknown config, or a peak that is unknown for this device kind.
    """
    preset, batch, seq, overrides = accelerator_setup(config, dry_run, batch_per_device, seq, remat, fp8)
    if dry_run:
        steps, warmup = 1, 1
    devices = jax.device_count()
    peak_per_device = peak_flops_per_device()
    result = measure(
        preset,
        steps=steps,
        warmup=warmup,
        batch=batch,
        seq=seq,
        dtype="bfloat16",
        optimizer=optimizer,
        peak_gflops=peak_per_device * devices / 1e9,
        **overrides,
    )
    return {
        **result,
        "tokens_per_s_per_device": result["tokens_per_s"] / devices,
        "peak_tflops_per_device": peak_per_device / 1e12,
        "attention_impl": overrides["attention_impl"],
        "device_kind": jax.devices()[0].device_kind,
        "fp8": fp8,
    }


def format_accelerator(config: str, dry_run: bool, r: dict) -> str:
    """One human-readable line of `measure_accelerator`'s result."""
    return (
        f"{config}{' (dry run)' if dry_run else ''} on {r['devices']} x {r['device_kind']} "
        f"attention={r['attention_impl']} {'fp8' if r['fp8'] else 'bf16'} {r['optimizer']} batch={r['batch']} seq={r['seq']}: "
        f"tokens_per_s_per_device={r['tokens_per_s_per_device']:.0f} step_ms={r['step_ms']:.1f} "
        f"mfu={100 * r['mfu']:.1f}% (peak {r['peak_tflops_per_device']:.4g} TFLOP/s/device, "
        f"{r['train_flops_per_token'] / 1e9:.3g} GFLOP/token) first_step={r['first_step_s']:.1f}s "
        f"loss={r['loss']:.3f} temporaries={r['temp_mib'] / 1024:.2f}GiB peak={r['peak_gb']:.2f}GB "
        f"kernels={','.join(r['kernels']) or '-'}"
    )
