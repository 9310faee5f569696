"""docs/accelerators.md "On a real GPU": the accelerator check (`benchmarks/accelerator_check.sh --out DIR`) run
on a machine with one GPU, its JSON outputs gathered into one record.

    values = check_values(out_dir)                  # the outputs of a run made elsewhere (a GPU machine)
    values = measure_accelerator_check(REPO, scratch)  # runs the check here: needs a GPU

The tests never re-run it (no GPU in CI). The record keeps the outputs whole: per train-step config the
throughput, MFU, compiled memory, peak allocation and kernels (`benchmarks.step.measure_accelerator`), per
attention-kernel run the time, temporaries and errors (`benchmarks.attention_kernels`), and a summary of the
demo run's metrics (its training losses and the held-out losses after the last step).
"""

from __future__ import annotations

import json
import os
import statistics

from tools.measure import commands

ACCELERATOR_CHECK_RUN = "bash benchmarks/accelerator_check.sh --out DIR"
# The JSON files the check writes into --out (attention kernels, then the train-step configs).
CHECK_OUTPUTS = (
    "attention_kernels",
    "attention_kernels_32k",
    "1b_bf16",
    "8b-slice_bf16",
    "1b_fp8",
    "8b-slice_fp8",
    "1b_fp8_cublas",
    "8b-slice_fp8_cublas",
)


def demo_summary(metrics_path: str) -> dict:
    """first_loss, last20_mean and final_loss of the training steps (nats per token), median_tokens_per_s over
    steps 2.. and the held-out losses of the last evaluation (`prose_loss`, `udhr_loss`,
    `unseen_languages_loss`) of a metrics.jsonl."""
    with open(metrics_path) as f:
        records = [json.loads(line) for line in f]
    steps = [r for r in records if "loss" in r]
    last_eval = [r for r in records if "eval/seconds" in r][-1]
    losses = [r["loss"] for r in steps]
    return {
        "steps": len(steps),
        "first_loss": losses[0],
        "last20_mean": statistics.fmean(losses[-20:]),
        "final_loss": losses[-1],
        "median_tokens_per_s": statistics.median(r["tokens_per_s"] for r in steps[1:]),
        "prose_loss": last_eval["eval/prose/loss"],
        "udhr_loss": last_eval["eval/udhr/loss"],
        "unseen_languages_loss": last_eval["eval/unseen_languages/udhr/loss"],
    }


def check_values(out_dir: str) -> dict:
    """The record's values from the --out directory of one accelerator check: each of `CHECK_OUTPUTS` under its
    name ("-" as "_"), `demo` (`demo_summary`), and `device_kind` and `jax` of the run.

    Raises:
      FileNotFoundError: an output is missing (its stage failed).
    """
    values = {}
    for name in CHECK_OUTPUTS:
        with open(os.path.join(out_dir, f"{name}.json")) as f:
            values[name.replace("-", "_")] = json.load(f)
    values["demo"] = demo_summary(os.path.join(out_dir, "demo_metrics.jsonl"))
    values["device_kind"] = values["attention_kernels"]["device_kind"]
    values["jax"] = values["attention_kernels"]["jax"]
    return values


def measure_accelerator_check(root: str, scratch: str) -> dict:
    """Runs the accelerator check with --out SCRATCH and returns `check_values` of it.

    Raises:
      ChildProcessError: a stage failed.
    """
    commands.run(["bash", "benchmarks/accelerator_check.sh", "--out", scratch], root, {})
    return check_values(scratch)


# BENCHMARKS.md "Where the GPU step's time goes": the train-step configs in bf16 and profiled (the check's stages
# bf16 and profile), run on a machine with one GPU.
GPU_PROFILE_RUN = "bash benchmarks/accelerator_check.sh --stages=bf16,profile --out DIR"
PROFILE_CONFIGS = ("1b", "8b-slice")
# The ops listed per config in the rendered block (the results file keeps them all).
RENDERED_TOP_OPS = 10


def profile_values(out_dir: str) -> tuple[dict, dict]:
    """The values and the machine of a `GPU_PROFILE_RUN` made elsewhere, from its --out directory: per config of
    `PROFILE_CONFIGS` (its name "-" as "_") the profile (`benchmarks.profile`) whole with `bf16_stage`, the
    bf16 stage's result (`benchmarks.step.measure_accelerator`); `device_kind` and `jax` of the run. The machine
    is as a results record names it: {"platform": "one NVIDIA H100 ..., Python ... with jax ... and flax ...",
    "cpus": N}.

    Raises:
      FileNotFoundError: an output is missing (its stage failed).
    """
    values = {}
    for config in PROFILE_CONFIGS:
        with open(os.path.join(out_dir, f"profile_{config}.json")) as f:
            profiled = json.load(f)
        with open(os.path.join(out_dir, f"{config}_bf16.json")) as f:
            profiled["bf16_stage"] = json.load(f)
        values[config.replace("-", "_")] = profiled
    first = values[PROFILE_CONFIGS[0].replace("-", "_")]
    values["device_kind"], values["jax"] = first["device_kind"], first["jax"]
    count = "one" if first["devices"] == 1 else f"{first['devices']} x"
    machine = {
        "platform": f"{count} {first['device_kind']}, Python {first['python']} with jax {first['jax']} and "
        f"flax {first['flax']}",
        "cpus": first["cpus"],
    }
    return values, machine


def measure_gpu_profile(root: str, scratch: str) -> dict:
    """Runs `GPU_PROFILE_RUN` with --out SCRATCH here (needs a GPU) and returns `profile_values`' values.

    Raises:
      ChildProcessError: a stage failed.
    """
    commands.run(GPU_PROFILE_RUN.replace("DIR", scratch).split(), root, {})
    return profile_values(scratch)[0]


def render_gpu_profile(values: dict) -> str:
    """BENCHMARKS.md's tables of where the GPU step's time goes (`profile_values`' values): per config the step
    (untraced ms, MFU, the bf16 stage's MFU, the traced step and the GPU's idle share of it), the time per part
    with its GEMMs against the peak, per kernel kind, and the `RENDERED_TOP_OPS` largest ops."""
    lines = []
    for config in PROFILE_CONFIGS:
        r = values[config.replace("-", "_")]
        op_ms = r["op_ms"]
        lines += [
            f"**{config}** ({r['batch']} x {r['seq']:,} tokens, {r['dtype']}, {r['optimizer']}; peak "
            f"{r['peak_tflops']:.0f} TFLOP/s):",
            "",
            "| step ms (untraced) | MFU | MFU of the bf16 stage | traced step ms | GPU idle in the traced step "
            "| kernel time ms | GEMM TFLOP per step (model's) |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            f"| {r['step_ms']:.1f} | {r['mfu']:.1%} | {r['bf16_stage']['mfu']:.1%} | {r['traced_step_ms']:.1f} "
            f"| {r['idle_share']:.1%} | {op_ms:.1f} | {r['gemm_tflop_per_step']:.2f} "
            f"({r['model_tflop_per_step']:.2f}) |",
            "",
            "| part | ms | share | GEMM ms | GEMM TFLOP/s | of peak | GEMM ms beyond peak |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for part, ms in r["parts"].items():
            g = r["gemm"].get(part)
            gemm = (
                f"{g['ms']:.1f} | {g['tflops']:.0f} | {g['of_peak']:.0%} | {g['gap_ms']:.1f}"
                if g
                else "| | |"
            )
            lines.append(f"| {part} | {ms:.1f} | {ms / op_ms:.1%} | {gemm} |")
        lines += ["", "| kernel kind | ms | share |", "| --- | ---: | ---: |"]
        lines += [f"| {kind} | {ms:.1f} | {ms / op_ms:.1%} |" for kind, ms in r["kinds"].items()]
        lines += [
            "",
            "| largest ops | part | kind | ms | share | TFLOP/s | of peak | kernel |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for o in r["top"][:RENDERED_TOP_OPS]:
            gemm = f"{o['tflops']:.0f} | {o['of_peak']:.0%}" if "tflops" in o else "|"
            lines.append(
                f"| `{o['op']}` | {o['part']} | {o['kind']} | {o['ms']:.2f} | {o['share']:.1%} | {gemm} "
                f"| `{o['kernel'][:48]}` |"
            )
        lines.append("")
    return "\n".join(lines[:-1]) + "\n"
