"""The CPU memory plans of docs/scaling.md, docs/long_context.md and docs/ablations.md, and the optimizer
state and collectives of docs/optimizers.md: each `experiments.memory_plan` command writes its rows with
`--json`, read back here.

    values = measure_memory_plan(REPO, scratch)

Values in GB (1e9 bytes per device) keep 2 decimals, the figures the command's tables print.
"""

from __future__ import annotations

from apertus_jax.aot import memory_plan
from tools.measure import commands

# The memory-plan commands of docs/scaling.md ("Memory plan"), by model and context.
PLAN_RUNS = {
    "8b": "python -m experiments.memory_plan --config=configs/runs/apertus_8b.py --rows_per_device=1 "
    "--json=/tmp/plan_8b.json",
    "70b": "python -m experiments.memory_plan --config=configs/runs/apertus_70b.py "
    "--meshes=1x256x1,1x64x4,1x32x1,1x16x1 --rows_per_device=1 --json=/tmp/plan_70b.json",
    "8b_64k": "python -m experiments.memory_plan --config=configs/runs/apertus_8b_long_context.py:64k "
    "--meshes=1x16x1x4,1x64x1x1 --rows_per_device=1 --json=/tmp/plan_8b_64k.json",
    "70b_64k": "python -m experiments.memory_plan --config=configs/runs/apertus_70b_long_context.py:64k "
    "--meshes=1x8x4x8 --rows_per_device=1 --json=/tmp/plan_70b_64k.json",
}


def _gb(size: int) -> float:
    """Bytes as GB (1e9 bytes), 2 decimals: the figures the memory-plan tables print."""
    return round(size / memory_plan.GB, 2)


def _memory_plans(runs: dict[str, str], root: str, scratch: str) -> dict:
    """The plans the `experiments.memory_plan` command lines `runs` {model: line} write (their `--json`), as
    values (`measure_memory_plan`).

    Raises:
      ChildProcessError: a command failed.
    """
    values = {"wall_seconds": {}}
    for model, line in runs.items():
        values["wall_seconds"][model] = round(commands.documented(line, root, scratch, {}), 1)
        for plan in commands.written_json(line, scratch):
            values[f"{model.split('_')[0]}_{plan['mesh']}"] = {
                **{k: plan[k] for k in ("devices", "microbatches", "rows")},
                "params": _gb(plan["params"]),
                "optimizer": _gb(plan["opt_state"]),
                "activations": _gb(plan["activations"]),
                "total": _gb(plan["total"]),
                **{
                    f"fits_{gb}": "yes" if plan["fits"][device] else "no"
                    for device, gb in memory_plan.DEVICE_MEMORY_GB.items()
                },
            }
    return values


def measure_memory_plan(root: str, scratch: str) -> dict:
    """The memory plans of docs/scaling.md: the plans each command writes.

    Returns:
      wall_seconds {model: seconds}; for each planned mesh, MODEL_MESH (e.g. `8b_1x64x1`, `8b_1x16x1x4`):
      {devices, microbatches, rows (per microbatch), params, optimizer, activations, total (GB = 1e9 bytes per
      device, 2 decimals as the table prints them), fits_80, fits_141, fits_95 ("yes" | "no": H100 80GB, H200
      141GB, TPU v5p 95GB)}.

    Raises:
      ChildProcessError: a command failed.
    """
    return _memory_plans(PLAN_RUNS, root, scratch)


# docs/ablations.md's memory plans of the pod-size ablations ("Pod sizes (1.5B and 3B)"): the 1.5B ablation
# config, and the same with the 3B preset (a preset override drops the file's model fields: the run's bf16,
# scan, full remat and cuDNN attention are set again, as the ablation command's `--set`s do).
ABLATION_PLAN_RUNS = {
    "1p5b": "python -m experiments.memory_plan --config=configs/runs/ablation_1p5b.py --meshes=1x8x1 "
    "--rows_per_device=1 --json=/tmp/plan_1p5b.json",
    "3b": "python -m experiments.memory_plan --config=configs/runs/ablation_1p5b.py "
    "--config.model.preset=apertus-3b --config.model.dtype=bfloat16 --config.model.scan_layers=True "
    "--config.model.remat_policy=full --config.model.attention_impl=cudnn --meshes=1x8x1,1x16x1 "
    "--rows_per_device=1 --json=/tmp/plan_3b.json",
}


def measure_ablation_memory_plan(root: str, scratch: str) -> dict:
    """docs/ablations.md's memory plans of the 1.5B and 3B ablation runs (`ABLATION_PLAN_RUNS`): the plans
    each command writes.

    Returns:
      as `measure_memory_plan`, models `1p5b` and `3b` (`1p5b_1x8x1`, `3b_1x8x1`, `3b_1x16x1`).

    Raises:
      ChildProcessError: a command failed.
    """
    return _memory_plans(ABLATION_PLAN_RUNS, root, scratch)


# docs/optimizers.md's (and docs/scaling.md's) AdEMAMix and Muon side by side on the 8B config, its default
# meshes 1x64x1 and 1x16x4 (`apertus_jax.aot.memory_plan.DEFAULT_MESHES`).
OPTIMIZER_MEMORY_RUN = (
    "python -m experiments.memory_plan --config=configs/runs/apertus_8b.py --optimizers=ademamix,muon "
    "--json=/tmp/optimizers.json"
)


def measure_optimizer_memory(root: str, scratch: str) -> dict:
    """The optimizer state and the collectives of one optimizer update of AdEMAMix and Muon on the 8B config
    (`OPTIMIZER_MEMORY_RUN`), from the rows it writes.

    Returns:
      wall_seconds; for each OPTIMIZER and MESH, OPTIMIZER_MESH (e.g. `muon_1x64x1`): {state_gb (optimizer
      state, GB = 1e9 bytes per device), and for each collective KIND the update has (`-` as `_`: all_gather,
      all_reduce, all_to_all, ...) KIND_ops (its ops) and KIND_gb (GB of their results per device and
      update)}, 2 decimals as the table prints them; a kind the update does not have is absent.

    Raises:
      ChildProcessError: the command failed.
    """
    values: dict = {"wall_seconds": round(commands.documented(OPTIMIZER_MEMORY_RUN, root, scratch, {}), 1)}
    for row in commands.written_json(OPTIMIZER_MEMORY_RUN, scratch):
        row_values: dict = {"state_gb": _gb(row["opt_state"])}
        for kind, collective in row["collectives"].items():
            name = kind.replace("-", "_")
            row_values.update({f"{name}_ops": collective["ops"], f"{name}_gb": _gb(collective["bytes"])})
        values[f"{row['optimizer']}_{row['mesh']}"] = row_values
    return values
