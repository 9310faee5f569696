"""StepProfiler: a trace of exactly the configured steps lands in WORKDIR/tensorboard/plugins/profile."""

import glob
import os

import jax
import jax.numpy as jnp
import pytest

from apertus_jax.train.metrics import ProfileConfig, StepProfiler


def test_traces_the_configured_steps_into_the_workdir(tmp_path):
    profiler = StepProfiler(ProfileConfig(start_step=2, steps=2), str(tmp_path))
    step = jax.jit(lambda x: jnp.tanh(x) @ x.T)
    x, active = jnp.ones((64, 64)), []
    for completed in range(5):
        profiler.before_step(completed)
        x = step(x)
        profiler.after_step(completed + 1, x)
        active.append(profiler.active)
    profiler.stop()
    assert active == [False, False, True, False, False]  # on during steps 3 and 4, stopped after step 4
    traces = glob.glob(os.path.join(tmp_path, "tensorboard", "plugins", "profile", "*", "*.xplane.pb"))
    assert len(traces) == 1 and os.path.getsize(traces[0]) > 0


def test_off_by_default_and_range_checked(tmp_path):
    profiler = StepProfiler(ProfileConfig(), str(tmp_path))
    profiler.before_step(ProfileConfig().start_step)
    assert not profiler.active
    with pytest.raises(ValueError, match="profile.steps"):
        ProfileConfig(steps=-1)
