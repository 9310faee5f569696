"""Muon through the trainer's front door on real text (configs/runs/tiny_resume.py): the loop's run resumes
bitwise from its checkpoint, the state restores onto another mesh within float32 rounding, and
`checkpoint.init_from` switches an AdEMAMix run's parameters to Muon."""

import dataclasses

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from jax.sharding import PartitionSpec as P

from apertus_jax.config.schema import parse
from apertus_jax.jobs.pretrain import run_training
from apertus_jax.models.partitioning import MeshConfig
from apertus_jax.train.run import Run
from apertus_jax.train.train_state import make_global_batch
from configs.runs import tiny_resume

STEPS, SAVED_AT = 6, 3


def _muon(config):
    return config.replace(optim=dataclasses.replace(config.optim, name="muon"))


def _train(run, state, batches):
    losses = []
    with jax.set_mesh(run.mesh):  # as the loop runs its step
        for batch in batches:
            step = run.train_step(batch["tokens"].shape[0] * jax.process_count()).fn
            params, opt_state, metrics = step(
                state["params"], state["opt_state"], make_global_batch(batch, run.mesh), None
            )
            state = {"params": params, "opt_state": opt_state}
            losses.append(float(metrics["loss"]))
    return state, losses


@pytest.mark.slow
def test_muon_loop_run_resumes_bitwise(tmp_path, losses_of):
    """12 steps uninterrupted vs 6 steps, then the same workdir extended to 12 (resumed from its checkpoint)."""
    config = _muon(parse(tiny_resume.get_config()))
    short = config.replace(train=dataclasses.replace(config.train, steps=6))
    assert run_training(config, str(tmp_path / "whole")) == "done"
    assert run_training(short, str(tmp_path / "resumed")) == "done"
    assert run_training(config, str(tmp_path / "resumed")) == "done"
    whole, resumed = losses_of(str(tmp_path / "whole")), losses_of(str(tmp_path / "resumed"))
    assert [s for s, _ in whole] == list(range(1, 13)) and resumed == whole  # float equality of every loss
    assert whole[-1][1] < whole[0][1] - 0.5  # it learns


@pytest.mark.slow
def test_muon_state_restores_onto_another_mesh(tmp_path):
    config = _muon(parse(tiny_resume.get_config()))
    run = Run(config)  # fsdp 2 x tensor 4 over the 8 virtual devices
    source = run.batch_source()
    batches = [next(source) for _ in range(STEPS)]  # 4 rows of 64 tokens of the UDHR each
    reference, reference_losses = _train(run, run.spec.init(), batches)
    first, _ = _train(run, run.spec.init(), batches[:SAVED_AT])
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(tmp_path / "saved", first)
    checkpointer.wait_until_finished()

    other = Run(config.replace(mesh=MeshConfig(data=1, fsdp=4, tensor=2)))
    moved = checkpointer.restore(tmp_path / "saved", other.spec.abstract)
    assert moved["params"]["layers"][0]["mlp"]["up"].sharding.spec == P("fsdp", "tensor")
    elsewhere, elsewhere_losses = _train(other, moved, batches[SAVED_AT:])
    np.testing.assert_allclose(elsewhere_losses, reference_losses[SAVED_AT:], rtol=1e-6, atol=0)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=0, atol=1e-6),
        jax.device_get(elsewhere),
        jax.device_get(reference),
    )


@pytest.mark.slow
def test_init_from_switches_an_ademamix_run_to_muon(uninterrupted, tmp_path, losses_of):
    """`checkpoint.init_from` of the AdEMAMix reference run: Muon starts from its parameters (a fresh Muon
    state), so its first loss is the AdEMAMix run's loss on that batch's model, far below a fresh start's."""
    config = _muon(parse(tiny_resume.get_config()))
    fresh = losses_of(uninterrupted)[0][1]
    switched = config.replace(
        train=dataclasses.replace(config.train, steps=3),
        checkpoint=dataclasses.replace(config.checkpoint, init_from=uninterrupted),
    )
    assert run_training(switched, str(tmp_path / "muon")) == "done"
    losses = [loss for _, loss in losses_of(str(tmp_path / "muon"))]
    assert len(losses) == 3 and losses[0] < fresh - 0.5, (losses, fresh)
