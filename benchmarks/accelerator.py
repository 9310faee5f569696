"""Train-step throughput and MFU on one accelerator (H100/H200/GH200 GPU or a TPU VM), bf16, fused attention.

    python -m benchmarks.accelerator --config=1b|8b-slice [--steps 10 --warmup 3 --batch_per_device N
        --seq T --remat POLICY --optimizer ademamix|adamw] [--dry_run]

Runs the trainer's real step (`benchmarks.step.measure_accelerator`: AdEMAMix by default, as in the Apertus recipe) with
bf16 compute and float32 parameters/optimizer state, over all local devices as a data-parallel mesh, and
prints tokens/s/device and MFU against the chip's dense bf16 peak (`apertus_jax.train.metrics`
`PEAK_FLOPS_PER_DEVICE`: H100/H200/GH200 989 TFLOP/s, TPU v4 275, v5e 197, v5p 459, v6e 918).
Attention: cuDNN on GPU, the splash Pallas kernel on TPU, XLA elsewhere. Layers are scanned; activations are
kept for matmuls without batch dimensions (`dots_with_no_batch_dims_saveable`; `--remat` changes it).
Targets: the Apertus report's ~31-35% MFU (8B on GH200, docs/recipe.md section 10); the aim is MaxText's 50%+.

`--fp8` switches the attention and MLP projections to FP8 (`ModelConfig.fp8`, `apertus_jax.models.fp8`).
`--json=PATH` also writes the result (throughput, MFU, the compiled step's memory, the device's peak allocation,
the program's kernels) as JSON. `--dry_run` runs the same code path with tiny widths for 2 steps on any backend (CPU CI keeps it working).
"""

import json

from absl import flags

from benchmarks import step
from benchmarks.configs import ACCELERATOR_CONFIGS
from experiments import cli

_CONFIG = flags.DEFINE_enum("config", "1b", sorted(ACCELERATOR_CONFIGS), "benchmarks.configs entry")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "tiny widths, 2 steps, any backend")
_STEPS = flags.DEFINE_integer("steps", 10, "timed steps")
_WARMUP = flags.DEFINE_integer("warmup", 3, "untimed steps first (the first compiles)")
_BATCH_PER_DEVICE = flags.DEFINE_integer("batch_per_device", 0, "0: the config's default")
_SEQ = flags.DEFINE_integer("seq", 0, "0: the config's default")
_REMAT = flags.DEFINE_enum(
    "remat",
    "dots_with_no_batch_dims_saveable",
    ["none", "full", "dots_saveable", "dots_with_no_batch_dims_saveable"],
    "activation rematerialization policy of the scanned layers",
)
_OPTIMIZER = flags.DEFINE_enum("optimizer", "ademamix", ["ademamix", "adamw"], "optimizer")
_FP8 = flags.DEFINE_bool("fp8", False, "FP8 projections (ModelConfig.fp8)")
_JSON = flags.DEFINE_string("json", "", "also write the result as JSON to this path")


def main(argv) -> None:
    del argv
    result = step.measure_accelerator(
        _CONFIG.value,
        _DRY_RUN.value,
        _STEPS.value,
        _WARMUP.value,
        _BATCH_PER_DEVICE.value,
        _SEQ.value,
        _REMAT.value,
        _OPTIMIZER.value,
        _FP8.value,
    )
    print(step.format_accelerator(_CONFIG.value, _DRY_RUN.value, result))
    if _JSON.value:
        with open(_JSON.value, "w") as f:
            json.dump({**result, "accelerator_config": _CONFIG.value, "dry_run": _DRY_RUN.value}, f, indent=1)


if __name__ == "__main__":
    cli.execute(main)
