"""Train-step throughput and MFU on one accelerator (H100/H200/GH200 GPU or a TPU VM), bf16, fused attention.

    python -m benchmarks.accelerator --config=1b|8b-slice [--steps 10 --warmup 3 --batch_per_device N
        --seq T --remat POLICY --optimizer ademamix|adamw] [--dry_run]

Runs the trainer's real step (`benchmarks.train_step`: AdEMAMix by default, as in the Apertus recipe) with
bf16 compute and float32 parameters/optimizer state, over all local devices as a data-parallel mesh, and
prints tokens/s/device and MFU against the chip's dense bf16 peak (`apertus_jax.train.metrics`
`PEAK_FLOPS_PER_DEVICE`: H100/H200/GH200 989 TFLOP/s, TPU v4 275, v5e 197, v5p 459, v6e 918).
Attention: cuDNN on GPU, the splash Pallas kernel on TPU, XLA elsewhere. Layers are scanned; activations are
kept for matmuls without batch dimensions (`dots_with_no_batch_dims_saveable`; `--remat` changes it).
Targets: the Apertus report's ~31-35% MFU (8B on GH200, docs/recipe.md section 10); the aim is MaxText's 50%+.

`--fp8` switches the attention and MLP projections to FP8 (`ModelConfig.fp8`, `apertus_jax.models.fp8`).
`--dry_run` runs the same code path with tiny widths for 2 steps on any backend (CPU CI keeps it working).
"""

import argparse

import jax

from apertus_jax.train.metrics import peak_flops_per_device
from benchmarks import train_step
from benchmarks.configs import ACCELERATOR_CONFIGS, DRY_RUN

ATTENTION_BY_BACKEND = {"gpu": "cudnn", "tpu": "splash"}


def run(
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
    """Measures config `config` of `ACCELERATOR_CONFIGS`; returns `benchmarks.train_step.measure`'s dict plus
    tokens_per_s_per_device, peak_tflops_per_device and attention_impl.

    Raises:
      ValueError: unknown config, or a peak that is unknown for this device kind.
    """
    if config not in ACCELERATOR_CONFIGS:
        raise ValueError(f"unknown --config={config!r}; choose one of {sorted(ACCELERATOR_CONFIGS)}")
    spec = ACCELERATOR_CONFIGS[config]
    overrides = dict(spec["overrides"], fp8=fp8)
    if dry_run:
        spec = {**spec, **DRY_RUN}
        overrides.update(DRY_RUN["overrides"])
        steps, warmup = 1, 1
    devices = jax.device_count()
    batch = (batch_per_device or spec["batch_per_device"]) * devices
    attention_impl = ATTENTION_BY_BACKEND.get(jax.default_backend(), "xla")
    peak_per_device = peak_flops_per_device()
    result = train_step.measure(
        spec["preset"],
        steps=steps,
        warmup=warmup,
        batch=batch,
        seq=seq or spec["seq"],
        dtype="bfloat16",
        optimizer=optimizer,
        peak_gflops=peak_per_device * devices / 1e9,
        attention_impl=attention_impl,
        scan_layers=True,
        remat_policy=remat,
        **overrides,
    )
    return {
        **result,
        "tokens_per_s_per_device": result["tokens_per_s"] / devices,
        "peak_tflops_per_device": peak_per_device / 1e12,
        "attention_impl": attention_impl,
        "device_kind": jax.devices()[0].device_kind,
        "fp8": fp8,
    }


def format_result(config: str, dry_run: bool, r: dict) -> str:
    """One human-readable line of `run`'s result."""
    return (
        f"{config}{' (dry run)' if dry_run else ''} on {r['devices']} x {r['device_kind']} "
        f"attention={r['attention_impl']} {'fp8' if r['fp8'] else 'bf16'} {r['optimizer']} batch={r['batch']} seq={r['seq']}: "
        f"tokens_per_s_per_device={r['tokens_per_s_per_device']:.0f} step_ms={r['step_ms']:.1f} "
        f"mfu={100 * r['mfu']:.1f}% (peak {r['peak_tflops_per_device']:.4g} TFLOP/s/device, "
        f"{r['train_flops_per_token'] / 1e9:.3g} GFLOP/token) first_step={r['first_step_s']:.1f}s "
        f"loss={r['loss']:.3f}"
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="1b", choices=sorted(ACCELERATOR_CONFIGS))
    parser.add_argument("--dry_run", action="store_true", help="tiny widths, 2 steps, any backend")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch_per_device", type=int, default=0, help="0: the config's default")
    parser.add_argument("--seq", type=int, default=0, help="0: the config's default")
    parser.add_argument(
        "--remat",
        default="dots_with_no_batch_dims_saveable",
        choices=("none", "full", "dots_saveable", "dots_with_no_batch_dims_saveable"),
    )
    parser.add_argument("--optimizer", default="ademamix", choices=("ademamix", "adamw"))
    parser.add_argument("--fp8", action="store_true", help="FP8 projections (ModelConfig.fp8)")
    args = parser.parse_args(argv)
    try:
        r = run(
            args.config,
            args.dry_run,
            args.steps,
            args.warmup,
            args.batch_per_device,
            args.seq,
            args.remat,
            args.optimizer,
            args.fp8,
        )
    except ValueError as err:
        raise SystemExit(f"error: {err}") from err
    print(format_result(args.config, args.dry_run, r))


if __name__ == "__main__":
    main()
