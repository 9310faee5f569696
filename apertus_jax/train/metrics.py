"""Per-step metrics: WORKDIR/metrics.jsonl, TensorBoard events, a human log line with ETA, MFU.

MFU = achieved model FLOP/s / (peak FLOP/s per device x devices), with the model's exact per-token FLOPs
(apertus_jax.models.flops, docs/recipe.md section 10) and the peak table below.
"""

import json
import os
import time

import jax
from absl import logging

from apertus_jax import files
from apertus_jax.train.wandb_writer import WandbWriter

# Dense bf16 peak FLOP/s per device (vendor datasheets, no sparsity). Matched as substrings of
# `device.device_kind`, first match wins (so "v5 lite" is tested before "v5").
PEAK_FLOPS_PER_DEVICE = (
    ("GH200", 989e12),
    ("H200", 989e12),
    ("H100", 989e12),
    ("A100", 312e12),
    ("TPU v6 lite", 918e12),  # v6e
    ("TPU v5 lite", 197e12),  # v5e
    ("TPU v5p", 459e12),
    ("TPU v5", 459e12),  # v5p reports "TPU v5"
    ("TPU v4", 275e12),
)
# Measured on the project's 2-core AVX-512 CPU machine (`python -m benchmarks.peak`): float32 matmul ~210 GFLOP/s for
# 2 cores, i.e. ~105 GFLOP/s per core. A CPU "device" gets its share of the process's cores.
CPU_FLOPS_PER_CORE = 105e9


def peak_flops_per_device(device: jax.Device | None = None) -> float:
    """Peak FLOP/s of one device: the table above, or the measured CPU figure split over the CPU devices."""
    device = device or jax.devices()[0]
    if device.platform == "cpu":
        return CPU_FLOPS_PER_CORE * (os.cpu_count() or 1) / jax.local_device_count()
    for name, flops in PEAK_FLOPS_PER_DEVICE:
        if name in device.device_kind:
            return flops
    raise ValueError(
        f"no peak FLOP/s known for device kind {device.device_kind!r}; add it to "
        "PEAK_FLOPS_PER_DEVICE in apertus_jax/train/metrics.py"
    )


def mfu(tokens_per_s: float, flops_per_token: float, num_devices: int, peak_per_device: float) -> float:
    """Model FLOPs utilization in [0, 1]: (tokens/s x training FLOPs per token) / (devices x peak)."""
    return tokens_per_s * flops_per_token / (num_devices * peak_per_device)


def format_duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


class MetricsWriter:
    """Writes one JSON line per step to WORKDIR/metrics.jsonl and TensorBoard scalars to WORKDIR/tensorboard,
    and, with `wandb_project`, the same scalars to a Weights & Biases run (`train.wandb_writer.WandbWriter`).

    Only process 0 writes. On resume from step S, lines with step > S (written after the last checkpoint by a
    run that then crashed) are dropped first, so the file always reads as one uninterrupted run.
    """

    def __init__(
        self,
        workdir: str,
        total_steps: int,
        resume_step: int,
        wandb_project: str = "",
        run_config: dict | None = None,
    ):
        self.path = os.path.join(workdir, "metrics.jsonl")
        self.total_steps = total_steps
        self.enabled = jax.process_index() == 0
        self._start_time = None
        self._start_step = resume_step
        self._wandb = None
        if not self.enabled:
            return
        self._truncate_after(resume_step)

        from tensorboardX import SummaryWriter  # it imports torch when torch is installed: process 0 only

        self._tb = SummaryWriter(os.path.join(workdir, "tensorboard"))
        self._file = open(self.path, "a")
        if wandb_project:
            self._wandb = WandbWriter(workdir, wandb_project, run_config)

    def rewind(self, step: int) -> None:
        """Drops records after `step` (a rollback returned there); later records continue the file."""
        if not self.enabled:
            return
        self._file.close()
        self._truncate_after(step)
        self._file = open(self.path, "a")
        self._start_time, self._start_step = None, step

    def _truncate_after(self, step: int) -> None:
        if not os.path.exists(self.path):
            return
        kept = []
        with open(self.path) as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # a line cut short by a crash
                if json.loads(line)["step"] <= step:
                    kept.append(line)
        files.write_text(self.path, "".join(kept))

    def write(self, record: dict) -> None:
        """Appends `record` (must hold "step"; values are JSON numbers) and logs the human line."""
        if not self.enabled:
            return
        now = time.time()
        if self._start_time is None:
            self._start_time = now
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float)):
                self._tb.add_scalar(f"train/{key}", value, record["step"])
        if self._wandb is not None:
            self._wandb.log(record)
        done = record["step"] - self._start_step
        elapsed = now - self._start_time
        eta = elapsed / max(done - 1, 1) * (self.total_steps - record["step"]) if done > 1 else float("nan")
        logging.info(
            "step %d/%d | loss %.4f | lr %.3g | grad_norm %.3g | %.0f tok/s | MFU %.1f%% | skipped %d | ETA %s",
            record["step"],
            self.total_steps,
            record["loss"],
            record["lr"],
            record["grad_norm"],
            record["tokens_per_s"],
            100 * record["mfu"],
            record["skipped_steps"],
            format_duration(eta) if eta == eta else "?",
        )

    def write_scalars(self, record: dict) -> None:
        """Appends a record of other scalars (must hold "step"; e.g. `eval/...` keys) to metrics.jsonl and
        TensorBoard under its own key names, and logs them in one line."""
        if not self.enabled:
            return
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float)):
                self._tb.add_scalar(key, value, record["step"])
        values = " | ".join(f"{k} {v:.4g}" for k, v in record.items() if k != "step")
        logging.info("step %d | %s", record["step"], values)

    def close(self) -> None:
        if self.enabled:
            self._file.close()
            self._tb.close()
            if self._wandb is not None:
                self._wandb.close()
