"""Where a train step's time goes: the command of `benchmarks.trace_profile` (its docstring: the trace read, the
parts and kinds an op is attributed to, the GEMMs' gap to the roofline).

    python -m benchmarks.profile --config=bench-18m-apertus [--steps 3 --top 15 --batch 4 --seq 256]
    python -m benchmarks.profile --accelerator_config=1b|8b-slice [--dry_run] [--json=PATH]

`--accelerator_config` profiles the step of `benchmarks.accelerator` (bf16, the backend's fused attention,
scanned layers; `benchmarks.step.accelerator_setup`) instead of a model preset's. Prints the profile's table;
`--json` writes it whole.
"""

from absl import flags

from apertus_jax import files
from benchmarks import step as train_step
from benchmarks.configs import ACCELERATOR_CONFIGS
from benchmarks.trace_profile import format_profile, profile
from experiments import cli

_CONFIG = flags.DEFINE_string("config", "bench-18m-apertus", "model preset (apertus_jax.models.presets)")
_ACCELERATOR_CONFIG = flags.DEFINE_string(
    "accelerator_config",
    "",
    f"profile the step of benchmarks.accelerator for this config ({', '.join(sorted(ACCELERATOR_CONFIGS))}) "
    "instead of --config",
)
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "with --accelerator_config: tiny widths, any backend")
_WARMUP = flags.DEFINE_integer("warmup", 2, "untimed calls after the compile")
_STEPS = flags.DEFINE_integer("steps", 3, "timed calls, then as many traced calls")
_TOP = flags.DEFINE_integer("top", 15, "ops listed")
_BATCH = flags.DEFINE_integer("batch", 4, "rows per step (--config)")
_SEQ = flags.DEFINE_integer("seq", 256, "tokens per row (--config)")
_DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "compute dtype (--config)")
_OPTIMIZER = flags.DEFINE_enum("optimizer", "adamw", ["adamw", "ademamix"], "optimizer")
_JSON = flags.DEFINE_string("json", "", "also write the result as JSON to this path")


def main(argv) -> None:
    del argv
    if _ACCELERATOR_CONFIG.value:
        preset, batch, seq, overrides = train_step.accelerator_setup(
            _ACCELERATOR_CONFIG.value, _DRY_RUN.value
        )
        result = profile(preset, _STEPS.value, batch, seq, "bfloat16", "ademamix", _WARMUP.value, **overrides)
        result |= {"accelerator_config": _ACCELERATOR_CONFIG.value, "dry_run": _DRY_RUN.value}
    elif _DRY_RUN.value:
        raise ValueError("--dry_run shrinks an --accelerator_config; name one, or drop --dry_run")
    else:
        result = profile(
            _CONFIG.value,
            _STEPS.value,
            _BATCH.value,
            _SEQ.value,
            _DTYPE.value,
            _OPTIMIZER.value,
            _WARMUP.value,
        )
    print(format_profile(result, _TOP.value))
    if _JSON.value:
        files.write_json(_JSON.value, result, indent=1)


if __name__ == "__main__":
    cli.execute(main)
