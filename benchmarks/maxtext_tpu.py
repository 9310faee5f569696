"""Our 8B train step against MaxText's on the same TPU compiler: per-chip memory and the roofline step time of
one 4,096-token row per chip on a v5p-128 slice (64 chips), compile-only, no TPU needed.

    pip install -e ".[accelerators,maxtext]"       # Python 3.12: the current stack (docs/stacks.md)
    python -m benchmarks.maxtext_tpu --out DIR   # 23 minutes on 2 cores

All three programs are compiled by one libtpu in one venv: MaxText 0.2.5 needs jax >= 0.11.1, and installs beside
apertus_jax on the current stack (the `maxtext` extra); the record names the stack (`stack`: the versions of jax,
jaxlib, flax, libtpu and MaxText). The settings shared by all three programs: bf16 compute over float32 parameters, AdamW, full remat, layers
unrolled, one row per chip and no gradient accumulation, fsdp over the 64 chips, the splash (flash) kernel.
- `maxtext`: MaxText's `train_compile` for its `llama3.1-8b` (its printed memory and cost analyses are read).
- `ours_llama`: our 8B as Llama 3.1 (SwiGLU 14,336, no QK-norm, vocabulary 128,256) through
  `experiments.memory_plan --target=v5p-128` (its JSON), the same shapes as MaxText's model.
- `ours_apertus`: the Apertus 8B itself (xIELU 21,504, QK-norm, vocabulary 131,072).
The step time is the compiler's roofline (`optimal_seconds`) plus the splash attention core at peak, which
jax's kernel leaves out of the cost analysis (docs/accelerators.md); MaxText's program gets the same
attention seconds as our Llama variant (the same heads, length and layers, the same formula). Writes
DIR/maxtext_tpu.json: each program's GB per chip, seconds, collectives and what it holds at its heap peak
(`benchmarks.peak_buffers`, from the compiler's dumps in DIR), and the ratios ours / MaxText.
"""

import glob
import importlib.metadata
import json
import os
import re
import subprocess
import sys

from absl import flags

from apertus_jax.aot.memory_plan import collective_bytes
from benchmarks.peak_buffers import peak_groups
from experiments import cli

MAXTEXT_RUN = (
    "-m maxtext.trainers.pre_train.train_compile {base} compile_topology=v5p-128 compile_topology_num_slices=1 "
    "model_name=llama3.1-8b per_device_batch_size=1 max_target_length=4096 remat_policy=full "
    "scan_layers=false attention=flash dataset_type=synthetic run_name=maxtext_tpu"
)
OURS_RUN = (
    "-m experiments.memory_plan --config=configs/runs/apertus_8b.py --target=v5p-128 --meshes=1x64x1 "
    "--rows_per_device=1 --config.train.batch_plan=((0,262144),) --config.model.scan_layers=False "
    "--config.model.remat_policy=full --config.optim.name=adamw"
)
LLAMA = (
    "--config.model.mlp_type=swiglu --config.model.mlp_hidden=14336 --config.model.qk_norm=False "
    "--config.model.vocab_size=128256"
)
PEAK_GROUPS = 12  # the largest groups of values live at a program's heap peak kept in the record
_MEMORY = re.compile(r"Memory analysis: CompiledMemoryStats\((?P<fields>[^)]*)\)")
_COST = re.compile(r"'(?P<key>flops|optimal_seconds)': (?P<value>[0-9.e+-]+)")


def maxtext_values(log: str, hlo_text: str) -> dict:
    """GB per chip (1e9 bytes: `temps_gb`, `total_gb` = arguments + outputs - aliased + temporaries) and the
    roofline `flops` and `optimal_seconds` from the lines MaxText's `train_compile` prints, and the
    `collectives` of its compiled program (`hlo_text`, the dumped HLO after optimizations) counted as our plans
    count them (`apertus_jax.aot.memory_plan.collective_bytes`).

    Raises:
      ValueError: the log has no memory or cost analysis (the compile failed).
    """
    memory, costs = _MEMORY.search(log), dict(_COST.findall(log))
    if memory is None or set(costs) != {"flops", "optimal_seconds"}:
        raise ValueError("MaxText printed no memory or cost analysis: did train_compile fail? (its log)")
    stats = {k: int(v) for k, v in (f.strip().split("=") for f in memory["fields"].split(","))}
    total = (
        stats["argument_size_in_bytes"]
        + stats["output_size_in_bytes"]
        - stats["alias_size_in_bytes"]
        + stats["temp_size_in_bytes"]
    )
    collectives = {k: {"ops": n, "gb": b / 1e9} for k, (n, b) in collective_bytes(hlo_text).items() if n}
    return {
        "temps_gb": stats["temp_size_in_bytes"] / 1e9,
        "total_gb": total / 1e9,
        "flops": float(costs["flops"]),
        "optimal_seconds": float(costs["optimal_seconds"]),
        "collectives": collectives,
    }


def ours_values(plan_json: str) -> dict:
    """Our plan's per-chip GB and step estimate (`experiments.memory_plan --json`, one mesh)."""
    with open(plan_json) as f:
        (plan,) = json.load(f)
    keys = (
        "params_gb",
        "optimizer_gb",
        "temps_gb",
        "total_gb",
        "est_step_seconds",
        "attention_seconds",
        "collectives",
    )
    return {k: plan[k] for k in keys}


def compare(maxtext: dict, ours_llama: dict, ours_apertus: dict) -> dict:
    """The record: the three programs, MaxText's step with our Llama variant's attention seconds added, and
    ours / MaxText ratios of temporaries, total GB and step seconds."""
    maxtext = {**maxtext, "est_step_seconds": maxtext["optimal_seconds"] + ours_llama["attention_seconds"]}
    ratios = {
        name: {k: ours[k] / maxtext[k] for k in ("temps_gb", "total_gb", "est_step_seconds")}
        for name, ours in (("ours_llama", ours_llama), ("ours_apertus", ours_apertus))
    }
    return {"maxtext": maxtext, "ours_llama": ours_llama, "ours_apertus": ours_apertus, "ratios": ratios}


def peak(dump_dir: str) -> dict:
    """The heap peak of the train step dumped into `dump_dir`: `peak_gb` and its `PEAK_GROUPS` largest groups
    (`benchmarks.peak_buffers`)."""
    groups = peak_groups(dump_dir, "train_step")
    return {"peak_gb": sum(g["gb"] for g in groups), "peak_groups": groups[:PEAK_GROUPS]}


def _run(argv: list[str], log_path: str, dump_dir: str | None = None) -> str:
    # compile-only: libtpu's lock on the chips guards none here (apertus_jax.aot.compile_targets)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "ALLOW_MULTIPLE_LIBTPU_LOAD": "true"}
    if dump_dir:
        env["XLA_FLAGS"] = f"--xla_dump_to={dump_dir} --xla_dump_hlo_module_re=.*train_step.*"
    with open(log_path, "w") as log:
        subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=True, env=env)
    with open(log_path) as f:
        return f.read()


def stack() -> dict[str, str]:
    """The versions of the packages that compiled the programs (one venv for all three)."""
    return {name: importlib.metadata.version(name) for name in ("jax", "jaxlib", "flax", "libtpu", "maxtext")}


def main(argv) -> None:
    del argv
    out = flags.FLAGS.out
    # MaxText's own config, found by the venv's interpreter (this venv must hold MaxText: module docstring).
    where = "import maxtext, os; print(os.path.dirname(maxtext.__file__))"
    package = subprocess.run([sys.executable, "-c", where], capture_output=True, text=True, check=True).stdout
    base = os.path.join(package.strip(), "configs", "base.yml")
    hlo = os.path.join(out, "maxtext_hlo")
    # dumped through XLA_FLAGS as ours: MaxText's own dump_hlo=true uploads to Cloud Storage afterwards
    maxtext_log = _run(
        [sys.executable, *MAXTEXT_RUN.format(base=base).split()], os.path.join(out, "maxtext.log"), hlo
    )
    (hlo_path,) = glob.glob(os.path.join(hlo, "*jit_train_step*.after_optimizations.txt"))
    with open(hlo_path) as f:
        maxtext = {**maxtext_values(maxtext_log, f.read()), **peak(hlo)}
    plans = {}
    for name, extra in (("ours_llama", LLAMA), ("ours_apertus", "")):
        plan_json, dump = os.path.join(out, f"{name}.json"), os.path.join(out, f"{name}_hlo")
        _run(
            [sys.executable, *OURS_RUN.split(), *extra.split(), f"--json={plan_json}"],
            os.path.join(out, f"{name}.log"),
            dump,
        )
        plans[name] = {**ours_values(plan_json), **peak(dump)}
    record = {**compare(maxtext, plans["ours_llama"], plans["ours_apertus"]), "stack": stack()}
    with open(os.path.join(out, "maxtext_tpu.json"), "w") as f:
        json.dump(record, f, indent=1)
    for name, r in record["ratios"].items():
        print(
            f"{name} / maxtext: temporaries {r['temps_gb']:.2f}x, total {r['total_gb']:.2f}x, "
            f"step {r['est_step_seconds']:.2f}x"
        )


if __name__ == "__main__":
    # Defined here, not on import: the tests import the functions above beside other commands' flags.
    flags.DEFINE_string("out", None, "folder for the logs and maxtext_tpu.json", required=True)
    cli.execute(main)
