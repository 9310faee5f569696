"""The one assembly of a run: the train step is built once per row count, with the loop's shardings and
microbatches, and the memory plan compiles exactly that step."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from apertus_jax.config.schema import parse
from apertus_jax.models.presets import get_config
from apertus_jax.train.run import Run, run_config_for
from apertus_jax.train.step import Objective
from configs.runs import tiny_demo


def test_train_step_is_built_once_per_row_count_with_the_configured_microbatches():
    config = tiny_demo.get_config()
    with config.unlocked():
        config.train.microbatch_size = 8
        config.mesh.data, config.mesh.fsdp = 1, -1  # 8 virtual devices: fsdp 8
    run = Run(parse(config))
    step = run.train_step(16)
    assert run.train_step(16) is step
    assert (step.rows, step.num_microbatches) == (16, 2)
    assert run.train_step(32).num_microbatches == 4
    params_sharding, opt_sharding, batch_sharding, frozen_sharding = step.in_shardings
    assert frozen_sharding is None  # the pretraining objective reads no frozen parameters
    assert step.out_shardings[:2] == (params_sharding, opt_sharding)  # the state keeps its shardings
    assert tuple(batch_sharding.spec) == (("data", "fsdp"), None)
    assert params_sharding is run.spec.shardings["params"]


def test_step_config_feeds_own_batches_and_rejects_unknown_optim_fields():
    model = get_config("tiny", vocab_size=4096)
    config = run_config_for(model, seq_len=32, rows=8, steps=5, optim=dict(name="adamw", peak_lr=1e-3))
    run = Run(config)
    assert (run.config.optim.name, run.config.train.batch_plan) == ("adamw", ((0, 256),))
    with pytest.raises(ValueError, match=r"optim: unknown fields \['lr'\]"):
        run_config_for(model, seq_len=32, rows=8, steps=5, optim=dict(lr=1e-3))


def test_an_objective_declares_its_batch_arrays_for_the_lowered_step():
    def loss_fn(logits, mb, frozen):
        return (mb["weight"][:, 0] * logits[:, 0, 0]).sum(), {"count": np.float32(8)}

    objective = Objective(loss_fn, batch_arrays={"weight": ((3,), "float32")})
    run = Run(run_config_for(get_config("tiny"), seq_len=32, rows=8, steps=1, optim={}), objective=objective)
    batch = run.abstract_batch(8)
    assert batch["weight"].shape == (8, 3) and batch["weight"].dtype == np.float32
    assert batch["tokens"].shape == (8, 32) and batch["tokens"].dtype == np.int32
    assert "tensor<8x3xf32>" in run.lower_train_step(8).as_text()


# The loop's path (`Run(config)` over all devices, `run.train_step(rows)`) and the memory plan's
# (`memory_plan.plan_run` on virtual devices) lowered side by side for apertus_8b on 64 devices.
_COMPARE = textwrap.dedent(
    """
    import os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=64"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    from apertus_jax.aot import memory_plan
    from apertus_jax.config.schema import parse
    from apertus_jax.train.run import Run
    from configs.runs import apertus_8b

    config = apertus_8b.get_config()
    with config.unlocked():
        config.model.attention_impl = "xla"  # CPU: no cuDNN kernel (the memory plan does the same)
    config = parse(config)
    loop_run = Run(config)
    planned = memory_plan.plan_run(config, (1, 64, 1))
    rows = 2048  # the largest batch of the plan (8.4M tokens), which the memory plan compiles
    ours, theirs = loop_run.train_step(rows), planned.train_step(rows)
    assert planned.mesh.devices.shape == loop_run.mesh.devices.shape == (1, 64, 1)
    assert ours.num_microbatches == theirs.num_microbatches == 8, (ours.num_microbatches, theirs.num_microbatches)
    assert ours.in_shardings == theirs.in_shardings and ours.out_shardings == theirs.out_shardings
    with jax.set_mesh(loop_run.mesh):
        a = ours.fn.lower(loop_run.spec.abstract["params"], loop_run.spec.abstract["opt_state"],
                          loop_run.abstract_batch(rows), None).as_text()
    b = planned.lower_train_step(rows).as_text()
    assert a == b, "the memory plan lowers another program than the loop"
    print("same program", len(a), ours.num_microbatches)
    """
)


@pytest.mark.slow
def test_memory_plan_compiles_the_loops_step_for_apertus_8b_on_64_devices():
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    result = subprocess.run(
        [sys.executable, "-c", _COMPARE], capture_output=True, text=True, timeout=900, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "same program" in result.stdout
