"""docs/results.md "Across processor kinds": which XLA:CPU ops give other bits on other processors
(`benchmarks.cpu_ops`, natively and under qemu), what the portable flags cost the demo run, and the table of it.

    values = measure_cpu_portability(REPO, scratch)  # needs qemu-user
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import statistics
import sys

from tools.measure import commands, demo, processor_kinds

# The processors qemu's user-mode emulator (Debian/Ubuntu package qemu-user) presents to a program: an AMD and
# two Intel models; AVX2 at most, as its emulator has no AVX-512.
EMULATED_PROCESSORS = ("EPYC-v3", "Haswell-v4", "Skylake-Client-v4")
CPU_OPS = "python -m benchmarks.cpu_ops"
PORTABILITY_TIMED_PAIRS = 2


def measure_cpu_portability(root: str, scratch: str) -> dict:
    """docs/results.md "Across processor kinds": which XLA:CPU ops give other bits on other processors
    (`benchmarks.cpu_ops` on this processor and on each of `EMULATED_PROCESSORS` under qemu), with XLA's
    defaults and under `processor_kinds.PORTABLE_FLAGS`; then what those flags cost the demo run (the
    documented command, a fresh workdir and XLA cache each time, default and portable in turn).

    Returns:
      ops: {setting: {processor: {op: fingerprint}}}, setting "default" or "portable", processor "native"
      (this one) or an emulated model; differing: {setting: [ops whose fingerprints differ between the
      processors]}; demo_seconds: {setting: [wall seconds of each run]}; portable_slowdown: the median
      portable run's wall time over the median default run's; evaluation_only: {"default" or a perturbation:
      the held-out nll_per_token and unseen_languages_nll_per_token (nats) of the first default run's workdir,
      evaluated under those flags}; evaluation_only_spread: max - min of each over them.

    Raises:
      FileNotFoundError: no qemu-x86_64 (install qemu-user). ChildProcessError: a command failed.
    """
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        raise FileNotFoundError("cpu_portability needs qemu-x86_64: apt-get install qemu-user")
    settings = {"default": {}, "portable": {"XLA_FLAGS": processor_kinds.PORTABLE_FLAGS}}
    argv = [sys.executable, *shlex.split(CPU_OPS)[1:]]
    ops = {}
    for setting, env in settings.items():
        runs = {"native": argv, **{model: [qemu, "-cpu", model, *argv] for model in EMULATED_PROCESSORS}}
        ops[setting] = {
            cpu: json.loads(commands.run(run, root, env, capture=True)) for cpu, run in runs.items()
        }
    differing = {
        setting: [op for op in found["native"] if len({fp[op] for fp in found.values()}) > 1]
        for setting, found in ops.items()
    }
    seconds = {setting: [] for setting in settings}
    for turn in range(PORTABILITY_TIMED_PAIRS):
        for setting, env in settings.items():
            run = os.path.join(scratch, f"{setting}_{turn}")
            line = demo.DEMO_RUN.replace("/tmp/apertus_demo", f"/tmp/{setting}_{turn}/apertus_demo")
            cache = {"JAX_COMPILATION_CACHE_DIR": os.path.join(run, "xla")}
            seconds[setting].append(round(commands.documented(line, root, scratch, {**env, **cache}), 1))
    slowdown = statistics.median(seconds["portable"]) / statistics.median(seconds["default"])
    # The evaluation alone: the held-out perplexity of one trained workdir under each perturbation.
    workdir = os.path.join(scratch, "default_0", "apertus_demo")
    line = demo.EVALUATION_RUNS["perplexity"].replace("/tmp/apertus_demo", "/tmp/default_0/apertus_demo")
    evaluation = {}
    for label, flags in {"default": "", **processor_kinds.PERTURBATIONS}.items():
        commands.documented(line, root, scratch, {"XLA_FLAGS": flags})
        with open(os.path.join(workdir, "eval", "perplexity.json")) as f:
            found = json.load(f)
        unseen = found["unseen_languages"]["nll_per_token"]
        evaluation[label] = {
            "nll_per_token": found["nll_per_token"],
            "unseen_languages_nll_per_token": unseen,
        }
    return {
        "ops": ops,
        "differing": differing,
        "demo_seconds": seconds,
        "portable_slowdown": slowdown,
        "evaluation_only": evaluation,
        "evaluation_only_spread": processor_kinds.spreads(evaluation),
    }


def render_portability(values: dict) -> str:
    """docs/results.md's table of `cpu_portability`: per setting, the ops whose bits differ between the
    processors and the demo run's median wall time."""
    seconds = {setting: statistics.median(runs) for setting, runs in values["demo_seconds"].items()}
    flags = {"default": "XLA's defaults", "portable": "PORTABLE_FLAGS"}
    processors = ", ".join(values["ops"]["default"])
    lines = [
        f"| XLA flags | ops with other bits on another processor ({processors}) | demo run, median wall s |",
        "| --- | --- | --- |",
    ]
    for setting, ops in values["differing"].items():
        lines.append(f"| {flags[setting]} | {', '.join(ops) or 'none'} | {seconds[setting]:.1f} |")
    return "\n".join(lines) + "\n"
