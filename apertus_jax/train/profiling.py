"""A `jax.profiler` trace of a few steps of a real run, switched on from the config.

    --config.profile.steps=3 --config.profile.start_step=20

traces steps 21..23 (the steps after `start_step` completed steps, so compilation and warm-up stay out) into
WORKDIR/tensorboard/plugins/profile/<run>/, beside the run's scalars: `tensorboard --logdir WORKDIR/tensorboard`
shows it under "Profile" (the TensorBoard profile plugin, `pip install tensorboard-plugin-profile`), and
Perfetto / XProf read the `.xplane.pb` file directly. Every process writes its own trace.
"""

import dataclasses
import os

import jax
from absl import logging

from apertus_jax.checks import check_number


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
