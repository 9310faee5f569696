"""docs/accelerators.md: the train step compiled for TPU slices and GPU clusters
(`experiments.memory_plan --target ... --json`), the cuDNN document mask's cost, and the table of the Apertus
runs on their targets.

    values = measure_apertus_targets(REPO, scratch)  # needs the `accelerators` extra

The target plans are read from the JSON the commands write. `render_apertus_targets` reads a refused plan's
size and memory space from the compiler's own out-of-memory message (`_REFUSED`: XLA's text, kept whole in
the report's `oom`). The document mask's cost is still read from the lines `experiments.document_mask` prints
(`DOCUMENT_MASK_PRINTED`): its record was measured with that command, and measuring it again takes the
`accelerators` extra and half an hour of compiling.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from collections.abc import Mapping

from tools.measure import commands

# docs/accelerators.md: the 8B's train step compiled by the TPU and GPU compilers for compile-only devices
# (`experiments.memory_plan --target`, needs the `accelerators` extra), and the cuDNN document mask's cost.
ACCELERATOR_PLAN_RUNS = {
    target: "python -m experiments.memory_plan --config=configs/runs/apertus_8b.py "
    f"--target={target} --rows_per_device=1 --json=/tmp/plan_{target.replace(':', '_')}.json"
    for target in ("v5p-128", "h100:1x8")
}
DOCUMENT_MASK_RUN = (
    "python -m experiments.document_mask --config=configs/runs/apertus_8b.py --target=h100:1x8"
)
DOCUMENT_MASK_PRINTED = re.compile(
    r"masked: (?P<masked_gb>[\d.]+) GB.*\ncausal: (?P<causal_gb>[\d.]+) GB.*\ndocument mask: "
    r"(?P<mask_gb>[\d.]+) GB.* alone (?P<mask_input_gb>[\d.]+) GB"
)
ACCELERATOR_PLAN_KEYS = (
    "devices",
    "mesh",
    "microbatches",
    "rows",
    "params_gb",
    "optimizer_gb",
    "temps_gb",
    "total_gb",
    "hbm_gb",
    "fits",
    "est_step_seconds",
    "est_mfu",
    "attention_seconds",
)


def _target_plan(line: str, root: str, scratch: str) -> tuple[float, dict]:
    """(wall seconds, report) of one documented `experiments.memory_plan --target ... --json=/tmp/...` command
    of one mesh: its `ACCELERATOR_PLAN_KEYS` (GB = 1e9 bytes per device; TPU also the estimate when made), the
    compiler's out-of-memory line `oom` when it refused the program, `kernels` (their names joined by ", ").

    Raises:
      ChildProcessError: the command failed.
    """
    seconds = round(commands.documented(line, root, scratch, {}), 1)
    (report,) = commands.written_json(line, scratch)
    values = {k: report[k] for k in (*ACCELERATOR_PLAN_KEYS, "oom") if k in report}
    values["kernels"] = ", ".join(report["kernels"])
    return seconds, values


def measure_accelerator_plans(root: str, scratch: str) -> dict:
    """The 8B on a v5p-128 slice and on 8 H100s (`ACCELERATOR_PLAN_RUNS`, their JSON reports) and the cuDNN
    document mask's memory (`DOCUMENT_MASK_RUN`, as printed).

    Returns:
      wall_seconds {name: seconds}; v5p_128 and h100_1x8: the report's `ACCELERATOR_PLAN_KEYS` (GB = 1e9 bytes
      per device; TPU also the estimate) and `kernels` (their names joined by ", "); document_mask: masked_gb,
      causal_gb, mask_gb, mask_input_gb (3 decimals as printed).

    Raises:
      ChildProcessError: a command failed. ValueError: the document-mask command printed no cost.
    """
    values: dict = {"wall_seconds": {}}
    for target, line in ACCELERATOR_PLAN_RUNS.items():
        name = target.replace(":", "_").replace("-", "_")
        values["wall_seconds"][name], values[name] = _target_plan(line, root, scratch)
    start = time.perf_counter()
    printed = DOCUMENT_MASK_PRINTED.search(
        commands.run([sys.executable, *shlex.split(DOCUMENT_MASK_RUN)[1:]], root, {}, capture=True)
    )
    values["wall_seconds"]["document_mask"] = round(time.perf_counter() - start, 1)
    if printed is None:
        raise ValueError(f"`{DOCUMENT_MASK_RUN}` printed no document-mask cost (its format changed?)")
    values["document_mask"] = {k: float(v) for k, v in printed.groupdict().items()}
    return values


# docs/accelerators.md "The Apertus runs on their targets": each run on the smallest slice or cluster compiled
# that holds it, GPU plans first (seconds each), then TPU (minutes each; only the 8B's with the step-time
# estimate, whose four extra compiles take longer than the plan itself on 2 cores).
APERTUS_TARGETS = (  # name, the run as the table labels it, config, target, extra flags
    ("8b_h100_1x4", "8B", "configs/runs/apertus_8b.py", "h100:1x4", ""),
    ("8b_muon_h100_1x4", "8B, Muon", "configs/runs/apertus_8b.py", "h100:1x4", "--config.optim.name=muon "),
    ("8b_h200_1x2", "8B", "configs/runs/apertus_8b.py", "h200:1x2", ""),
    ("70b_h100_4x8", "70B", "configs/runs/apertus_70b.py", "h100:4x8", ""),
    ("70b_h200_2x8", "70B", "configs/runs/apertus_70b.py", "h200:2x8", ""),
    ("8b_b200_1x8", "8B", "configs/runs/apertus_8b.py", "b200:1x8", ""),
    ("8b_v5p_8", "8B", "configs/runs/apertus_8b.py", "v5p-8", ""),
    (
        "8b_muon_v5p_8",
        "8B, Muon",
        "configs/runs/apertus_8b.py",
        "v5p-8",
        "--config.optim.name=muon --nostep_estimate ",
    ),
    (
        "8b_64k_v5p_8",
        "8B, 64k stage",
        "configs/runs/apertus_8b_long_context.py:64k",
        "v5p-8",
        "--meshes=1x1x1x4 --nostep_estimate ",
    ),
    (
        "8b_256k_v5p_16",
        "8B, 256k stage",
        "configs/runs/apertus_8b_262k.py:256k",
        "v5p-16",
        "--meshes=1x1x1x8 --nostep_estimate ",
    ),
    ("70b_v5p_64", "70B", "configs/runs/apertus_70b.py", "v5p-64", "--nostep_estimate "),
    ("8b_v6e_256", "8B", "configs/runs/apertus_8b.py", "v6e-256", ""),
    ("70b_v6e_256", "70B", "configs/runs/apertus_70b.py", "v6e-256", "--nostep_estimate "),
    # TPU7x: the step-time estimate stops there (a loop left in the unscanned one-layer program).
    ("8b_tpu7x_8", "8B", "configs/runs/apertus_8b.py", "tpu7x-8", "--nostep_estimate "),
    ("70b_tpu7x_64", "70B", "configs/runs/apertus_70b.py", "tpu7x-64", "--nostep_estimate "),
    (
        "70b_256k_v5p_128",
        "70B, 256k stage",
        "configs/runs/apertus_70b_262k.py:256k",
        "v5p-128",
        "--meshes=1x1x4x16 --nostep_estimate ",
    ),
)
APERTUS_TARGET_RUNS = {
    name: f"python -m experiments.memory_plan --config={config} --target={target} --rows_per_device=1 "
    f"{extra}--json=/tmp/{name}.json"
    for name, _, config, target, extra in APERTUS_TARGETS
}


def measure_apertus_targets(root: str, scratch: str) -> dict:
    """The Apertus runs on their targets (`APERTUS_TARGET_RUNS`, their JSON reports), progress with an ETA.

    Returns:
      wall_seconds {name: seconds}; per name the report of `_target_plan`.

    Raises:
      ChildProcessError: a command failed.
    """
    values: dict = {"wall_seconds": {}}
    start = time.perf_counter()
    for done, (name, line) in enumerate(APERTUS_TARGET_RUNS.items()):
        print(
            f"[{done + 1}/{len(APERTUS_TARGET_RUNS)}] {name} ({time.perf_counter() - start:.0f} s so far)",
            flush=True,
        )
        values["wall_seconds"][name], values[name] = _target_plan(line, root, scratch)
    return values


_REFUSED = re.compile(r"size=(\d+)\) would exceed memory \(size=(\d+)\).*?space=(\w+)")


def render_apertus_targets(values: Mapping) -> str:
    """docs/accelerators.md's table of the Apertus runs on their targets (`measure_apertus_targets`' values):
    per run the target, mesh, per-device GB (1e9 bytes) against HBM, the attention kernel, and on TPU where
    estimated the step time and MFU; a plan the compiler refused names the memory it ran out of."""
    lines = [
        "| run | target | mesh | microbatches x rows | params | optimizer | temporaries | total / HBM GB "
        "| attention | est. step s | est. MFU |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, what, _, target, _ in APERTUS_TARGETS:
        plan = values[name]
        if plan.get("oom"):
            found = _REFUSED.search(plan["oom"])
            total = "refused: out of memory"
            if found:
                need, have, space = found.groups()
                total = f"refused: {int(need) / 2**20:g} MiB > {int(have) / 2**20:g} MiB of {space.upper()}"
        else:
            total = f"{plan['total_gb']:.1f} / {plan['hbm_gb']:.0f}"
        kernel = (
            "splash" if "splash" in plan["kernels"] else "cuDNN" if "cudnn" in plan["kernels"] else "none"
        )
        cells = [
            what,
            target,
            plan["mesh"],
            f"{plan['microbatches']} x {plan['rows']}",
            f"{plan['params_gb']:.1f}",
            f"{plan['optimizer_gb']:.1f}",
            "" if plan["temps_gb"] is None else f"{plan['temps_gb']:.1f}",
            total,
            kernel if plan["kernels"] else "",
            f"{plan['est_step_seconds']:.0f}" if "est_step_seconds" in plan else "",
            f"{plan['est_mfu']:.0%}" if "est_mfu" in plan else "",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# BENCHMARKS.md "Train step on the TPU compiler against MaxText": needs the venv of `benchmarks.maxtext_tpu`
# (the current stack with the accelerators and maxtext extras); not re-run by the tests.
MAXTEXT_TPU_RUN = "python -m benchmarks.maxtext_tpu --out DIR  # in the venv its docstring gives"


def measure_maxtext_tpu(root: str, scratch: str) -> dict:
    """`benchmarks.maxtext_tpu --out SCRATCH` and its record (maxtext_tpu.json).

    Raises:
      ChildProcessError: the command failed.
    """
    commands.run([sys.executable, "-m", "benchmarks.maxtext_tpu", f"--out={scratch}"], root, {})
    with open(os.path.join(scratch, "maxtext_tpu.json")) as f:
        return json.load(f)
