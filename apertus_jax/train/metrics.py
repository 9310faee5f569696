"""What a run writes as it trains: per-step metrics (WORKDIR/metrics.jsonl, TensorBoard events, W&B, a human log
line with ETA, MFU) and `jax.profiler` traces of chosen steps.

MFU = achieved model FLOP/s / (peak FLOP/s per device x devices), with the model's exact per-token FLOPs
(apertus_jax.models.flops, docs/recipe.md section 10) and the peak table below.
"""

import dataclasses
import json
import os
import secrets
import string
import sys
import time

import jax
from absl import logging

from apertus_jax import files
from apertus_jax.checks import check_number

# Dense bf16 peak FLOP/s per device (vendor datasheets, no sparsity). Matched as substrings of
# `device.device_kind`, first match wins (so "v5 lite" is tested before "v5").
PEAK_FLOPS_PER_DEVICE = (
    ("GB200", 2500e12),  # before "B200", which it contains; NVIDIA's GB200 NVL72 sheet, per GPU
    ("B200", 2250e12),  # NVIDIA's HGX B200 sheet, per GPU
    ("GH200", 989e12),
    ("H200", 989e12),
    ("H100", 989e12),
    ("A100", 312e12),
    ("TPU7x", 2307e12 / 2),  # Ironwood: a chip's two TensorCores are two devices
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


def _summary_writer(logdir: str):
    """tensorboardX's `SummaryWriter` for LOGDIR, imported without torch: where torch is installed, tensorboardX
    imports it (about 3 s of a run's start-up on 2 cores) only to accept torch tensors, and it is given floats.
    torch stays importable afterwards."""
    hidden = "torch" not in sys.modules
    if hidden:  # `import torch` then raises ImportError, as tensorboardX expects without torch
        sys.modules["torch"] = None
    try:
        from tensorboardX import SummaryWriter
    finally:
        if hidden:
            del sys.modules["torch"]
    return SummaryWriter(logdir)


class MetricsWriter:
    """Writes one JSON line per step to WORKDIR/metrics.jsonl and TensorBoard scalars to WORKDIR/tensorboard,
    and, with `wandb_project`, the same scalars to a Weights & Biases run (`WandbWriter` below).

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

        self._tb = _summary_writer(os.path.join(workdir, "tensorboard"))
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

    def write(self, record: dict, shown: tuple[str, ...] = ()) -> None:
        """Appends `record` (must hold "step"; values are JSON numbers) and logs the human line, with the
        record's values of `shown` (the objective's own metrics: z_loss, kl and ce, ...) after the loss."""
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
            "step %d/%d | loss %.4f%s | lr %.3g | grad_norm %.3g | %.0f tok/s | MFU %.1f%% | skipped %d | ETA %s",
            record["step"],
            self.total_steps,
            record["loss"],
            "".join(f" | {key} {record[key]:.4f}" for key in shown),
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


# Optional Weights & Biases logging of the training scalars (`--config.metrics.wandb_project=NAME`).
#
# `MetricsWriter` forwards every metrics.jsonl record here when `metrics.wandb_project` is set: each numeric
# value except "step" is logged as `train/<key>` (the TensorBoard tag) at W&B step = the training step.
#
# Resume: the W&B run id is kept in `WORKDIR/wandb_run_id`, so a restarted run continues the same W&B run
# (`wandb.init(id=..., resume="allow")`). W&B's history only grows: steps logged between the last checkpoint
# and a crash are not removed, and W&B drops the re-logged ones (a step not above its last). A resumed run
# recomputes those steps bit for bit (the trainer's exact resume), so nothing is lost; after a
# non-finite rollback the W&B curve keeps the first attempt, metrics.jsonl the second.
#
# Offline: with `WANDB_MODE=offline` the run is written under `WORKDIR/wandb/offline-run-*` (upload later with
# `wandb sync`); every resumed process writes one more such directory with the same run id. The `wandb`
# package is optional (`pip install -e '.[wandb]'`); without `metrics.wandb_project` it is never imported.
RUN_ID_FILE = "wandb_run_id"


def check_wandb_config(metrics_config) -> None:
    """Up-front check of the `metrics` config section (before anything is written).

    Raises:
      ValueError: `wandb_project` is set but the `wandb` package is not installed.
    """
    if not metrics_config.wandb_project:
        return
    try:
        import wandb  # noqa: F401
    except ImportError:
        raise ValueError(
            f"metrics.wandb_project={metrics_config.wandb_project!r} needs the wandb package: "
            "pip install -e '.[wandb]' (or leave metrics.wandb_project empty)"
        ) from None


def run_id(workdir: str) -> str:
    """The W&B run id of `workdir`: read from `WORKDIR/wandb_run_id`, or a new one written there atomically."""
    path = os.path.join(workdir, RUN_ID_FILE)
    if os.path.exists(path):
        with open(path) as f:
            existing = f.read().strip()
        if existing:
            return existing
    # 8 characters of [a-z0-9], the alphabet and length of the ids W&B generates itself.
    new_id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))
    files.write_text(path, new_id + "\n")
    return new_id


class WandbWriter:
    """One W&B run per workdir, resumed across restarts (see the module docstring).

    Args:
      workdir: the training workdir (holds the run id file and, offline, the run files).
      project: W&B project name.
      run_config: the run config (a JSON-like dict) shown as the W&B run config.
    """

    def __init__(self, workdir: str, project: str, run_config: dict | None = None):
        import wandb

        self.run_id = run_id(workdir)
        self._run = wandb.init(
            project=project,
            id=self.run_id,
            resume="allow",
            dir=workdir,
            name=os.path.basename(os.path.abspath(workdir)),
            config=run_config,
        )

    def log(self, record: dict) -> None:
        """Log the numeric values of a metrics.jsonl `record` (must hold "step") at its step."""
        scalars = {
            f"train/{key}": value
            for key, value in record.items()
            if key != "step" and isinstance(value, (int, float))
        }
        self._run.log(scalars, step=int(record["step"]))

    def close(self) -> None:
        self._run.finish()


# A `jax.profiler` trace of a few steps of a real run, switched on from the config.
#
#     --config.profile.steps=3 --config.profile.start_step=20
#
# traces steps 21..23 (the steps after `start_step` completed steps, so compilation and warm-up stay out) into
# WORKDIR/tensorboard/plugins/profile/<run>/, beside the run's scalars: `tensorboard --logdir WORKDIR/tensorboard`
# shows it under "Profile" (the TensorBoard profile plugin, `pip install tensorboard-plugin-profile`), and
# Perfetto / XProf read the `.xplane.pb` file directly. Every process writes its own trace.
@dataclasses.dataclass(frozen=True)
class ProfileConfig:
    """The `profile` section: trace `steps` steps (0 = off) after `start_step` completed steps."""

    start_step: int = 10
    steps: int = 0

    def __post_init__(self):
        check_number("profile.start_step", self.start_step, low=0, integer=True)
        check_number("profile.steps", self.steps, low=0, integer=True)


class StepProfiler:
    """Starts the trace before step `start_step + 1` is dispatched and stops it once step
    `start_step + steps` has finished on the device."""

    def __init__(self, config: ProfileConfig, workdir: str):
        self.config = config
        self.log_dir = os.path.join(workdir, "tensorboard")
        self.active = False

    def before_step(self, completed: int) -> None:
        """Called with the number of steps dispatched so far, before dispatching the next one."""
        if self.config.steps and completed == self.config.start_step and not self.active:
            logging.info(
                "profiling steps %d..%d into %s", completed + 1, completed + self.config.steps, self.log_dir
            )
            jax.profiler.start_trace(self.log_dir)
            self.active = True

    def after_step(self, dispatched: int, outputs) -> None:
        """Called after dispatching step number `dispatched` with its outputs (waited for when the trace ends)."""
        if self.active and dispatched >= self.config.start_step + self.config.steps:
            jax.block_until_ready(outputs)
            self.stop()

    def stop(self) -> None:
        """Ends a running trace (also called when the run stops early)."""
        if self.active:
            jax.profiler.stop_trace()
            self.active = False
            logging.info("profile written to %s", self.log_dir)
