"""Memory plan: AOT-compile the train step on virtual CPU meshes, or with a TPU or GPU compiler for a real
target, and print per-device bytes (`apertus_jax.aot.memory_plan` and `apertus_jax.aot.target_plan`, where
the columns and caveats are described).

    python -m experiments.memory_plan --config=configs/runs/apertus_8b.py --json=/tmp/plan_8b.json
    python -m experiments.memory_plan --config=configs/runs/apertus_70b.py --meshes=1x256x1,1x64x4 --rows_per_device=1
    python -m experiments.memory_plan --config=configs/runs/apertus_8b_long_context.py:64k --meshes=1x16x1x4
    python -m experiments.memory_plan --config=configs/runs/apertus_8b.py --optimizers=ademamix,muon
    python -m experiments.memory_plan --config=configs/runs/apertus_8b.py --target=v5p-128 --rows_per_device=1 --json=/tmp/plan.json
    python -m experiments.memory_plan --config=configs/runs/apertus_8b.py --target=h100:1x8 --rows_per_device=1

Without `--target`, the train step the loop would run for the config's largest batch is lowered and compiled
over up to 256 virtual CPU devices (XLA_FLAGS and JAX_PLATFORMS are set here, before jax is imported);
nothing is allocated. The table (params, optimizer, activations, total per device, and whether it fits common
accelerators) is printed row by row as each mesh compiles. The microbatch is the config's
`train.microbatch_size` (override it like any field), or, with `--rows_per_device=N`, N sequences per
batch-sharded (data x fsdp) device of each mesh. With `--optimizers=ademamix,muon` it prints instead, per mesh
and optimizer, the optimizer state per device and the collectives of one optimizer update (only the update is
compiled). `--json=PATH` also writes the rows as JSON (bytes per device, `plan_lines`, `optimizer_lines`).

With `--target=NAME` (a TPU slice `v5p-128`, `v5e-256`, ... with `--num_slices`, or a GPU cluster `h100:1x8`;
`apertus_jax.aot.compile_targets`) the same step is compiled by that target's own compiler for compile-only devices,
with its attention kernel (splash on TPU, cuDNN on GPU): per device params, optimizer, temporaries, total
against HBM, the kernels and collectives in the program, and on TPU the estimated step time and MFU;
`--json=PATH` writes the reports; `--nostep_estimate` skips the estimate's four extra compiles. It needs the `accelerators` extra. The meshes default to the config's mesh
over the target's devices. A bad mesh or target, a missing extra, an unknown optimizer or a config a mesh does
not fit ends with one line on stderr and exit status 2; on the CPU plan every mesh and optimizer is checked
before the first line is printed.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=256"

from absl import flags  # noqa: E402

from apertus_jax.aot.compile_targets import parse_target, target_devices, target_forms  # noqa: E402
from apertus_jax.aot.memory_plan import mesh_shapes, optimizer_lines, plan_lines  # noqa: E402
from apertus_jax.aot.target_plan import target_lines, target_meshes  # noqa: E402
from experiments import cli  # noqa: E402

_CONFIG = cli.define_run_config("configs/runs/apertus_8b.py")
_MESHES = flags.DEFINE_list(
    "meshes",
    [],
    "Meshes as DATAxFSDPxTENSOR or DATAxFSDPxTENSORxCONTEXT (default: two per model size; with --target, the "
    "config's mesh over the target's devices).",
)
_ROWS = flags.DEFINE_integer(
    "rows_per_device",
    0,
    "Sequences per batch-sharded device in one microbatch (sets train.microbatch_size per mesh); "
    "0 = the config's train.microbatch_size as it is.",
)

_OPTIMIZERS = flags.DEFINE_list(
    "optimizers",
    [],
    "Optimizers (optim.name values) whose state and update collectives to compare per mesh, e.g. ademamix,muon; "
    "empty = the compiled train step's table.",
)
_TARGET = flags.DEFINE_string(
    "target",
    "",
    f"Compile for this target with its own compiler: {target_forms()}; empty = virtual CPU devices.",
)
_NUM_SLICES = flags.DEFINE_integer(
    "num_slices", 1, "TPU slices of --target joined over the network (multislice)."
)
_JSON = flags.DEFINE_string("json", "", "Also write the per-device plans to this JSON file.")
_STEP_ESTIMATE = flags.DEFINE_boolean(
    "step_estimate",
    True,
    "With a TPU --target: estimate the step time and MFU (four more compiles); --nostep_estimate: memory, "
    "kernels and collectives only.",
)


def main(argv) -> None:
    del argv
    parsed = cli.parsed_config(_CONFIG)
    folder = os.path.dirname(os.path.abspath(_JSON.value))
    if _JSON.value and not os.path.isdir(folder):
        raise ValueError(f"--json={_JSON.value}: the folder {folder} does not exist; create it first")
    if _TARGET.value:
        if _OPTIMIZERS.value:
            raise ValueError("--optimizers compares optimizers on the CPU plan; drop --target")
        target = parse_target(_TARGET.value, _NUM_SLICES.value)
        shapes = target_meshes(parsed, target, _MESHES.value)
        devices = target_devices(target)
        lines = target_lines(
            parsed,
            parsed.model_preset,
            target,
            devices,
            shapes,
            _ROWS.value,
            _JSON.value,
            _STEP_ESTIMATE.value,
        )
    elif _NUM_SLICES.value != 1:
        raise ValueError("--num_slices goes with --target=NAME")
    else:
        shapes = mesh_shapes(parsed, _MESHES.value)
        if _OPTIMIZERS.value:
            lines = optimizer_lines(parsed, parsed.model_preset, shapes, _OPTIMIZERS.value, _JSON.value)
        else:
            lines = plan_lines(parsed, parsed.model_preset, shapes, _ROWS.value, _JSON.value)
    for line in lines:
        print(line, flush=True)


if __name__ == "__main__":
    cli.execute(main)
