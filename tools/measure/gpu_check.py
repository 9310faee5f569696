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
