"""Memory plan: AOT-compile the train step on virtual CPU meshes and print per-device bytes
(`apertus_jax.jobs.memory_plan`, where the columns and caveats are described).

    python -m experiments.memory_plan --config=configs/runs/apertus_8b.py
    python -m experiments.memory_plan --config=configs/runs/apertus_70b.py --meshes=1x256x1,1x64x4 --rows_per_device=1
    python -m experiments.memory_plan --config=configs/runs/apertus_8b_long_context.py:64k --meshes=1x16x1x4
    python -m experiments.memory_plan --config=configs/runs/apertus_8b.py --optimizers=ademamix,muon

The train step the loop would run for the config's largest batch is lowered and compiled over up to 256
virtual CPU devices (XLA_FLAGS and JAX_PLATFORMS are set here, before jax is imported); nothing is allocated.
The table (params, optimizer, activations, total per device, and whether it fits common accelerators) is
printed row by row as each mesh compiles. The microbatch is the config's `train.microbatch_size` (override it
like any field), or, with `--rows_per_device=N`, N sequences per batch-sharded (data x fsdp) device of each
mesh. With `--optimizers=ademamix,muon` it prints instead, per mesh and optimizer, the optimizer state per device
and the collectives of one optimizer update (only the update is compiled). A bad mesh, an unknown optimizer or a
config a mesh does not fit ends with one line on stderr and exit status 2.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=256"

from absl import flags  # noqa: E402

from apertus_jax.jobs.memory_plan import mesh_shapes, optimizer_lines, plan_lines  # noqa: E402
from experiments import cli  # noqa: E402

_CONFIG = cli.define_run_config("configs/runs/apertus_8b.py")
_MESHES = flags.DEFINE_list(
    "meshes", [], "Meshes as DATAxFSDPxTENSOR or DATAxFSDPxTENSORxCONTEXT (default: two per model size)."
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


def main(argv) -> None:
    del argv
    parsed = cli.parsed_config(_CONFIG)
    shapes = mesh_shapes(parsed.run, _MESHES.value)
    if _OPTIMIZERS.value:
        lines = optimizer_lines(parsed.run, parsed.model_preset, shapes, _OPTIMIZERS.value)
    else:
        lines = plan_lines(parsed.run, parsed.model_preset, shapes, _ROWS.value)
    for line in lines:
        print(line, flush=True)


if __name__ == "__main__":
    cli.run(main)
