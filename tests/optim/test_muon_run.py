"""A Muon run of the trainer's train step on real text (configs/runs/tiny_resume.py): its state saved and restored
through Orbax as the trainer's checkpoints are, resumed bitwise on the same mesh and within float32 rounding on
another."""

import dataclasses

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from apertus_jax.jobs.config import parse
from apertus_jax.models.partitioning import make_mesh, state_logical_axes
from apertus_jax.models.transformer import Apertus
from apertus_jax.optim import opt_state_shardings
from apertus_jax.optim.config import make_tx
from apertus_jax.train.assemble import Run
from apertus_jax.train.sharding import make_global_batch
from apertus_jax.train.step import make_train_step
from apertus_jax.train.train_state import make_param_spec
from configs.runs import tiny_resume

STEPS, SAVED_AT = 6, 3


def _muon_step(config, mesh, lr_schedule):
    """(jitted step, abstract state with shardings, initial state) of a Muon run of `config` on `mesh`: what
    `Run` builds, with the logical axes Muon needs passed to `make_tx`."""
    _, abstract_model = nnx.split(nnx.eval_shape(lambda: Apertus(config.model, rngs=nnx.Rngs(0))), nnx.Param)
    tx = make_tx(config.optim, lr_schedule, state_logical_axes(abstract_model).to_pure_dict())
    params = make_param_spec(config.model, mesh, config.seed)
    opt_abstract = jax.eval_shape(tx.init, params.abstract)
    shardings = {
        "params": params.shardings,
        "opt_state": opt_state_shardings(tx, opt_abstract, params.shardings, NamedSharding(mesh, P())),
    }
    abstract = jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
        {"params": params.abstract, "opt_state": opt_abstract},
        shardings,
    )
    step = jax.jit(
        make_train_step(params.apply_fn, tx, 1, hidden_fn=params.hidden_fn, clip_norm=config.optim.clip_norm),
        in_shardings=(shardings["params"], shardings["opt_state"], None),
        out_shardings=(shardings["params"], shardings["opt_state"], None),
    )
    init = jax.jit(
        lambda: {"params": (p := params.create()), "opt_state": tx.init(p)}, out_shardings=shardings
    )
    return step, abstract, init


def _train(step, state, batches, mesh):
    losses = []
    with jax.set_mesh(mesh):  # as the loop runs its step
        for batch in batches:
            params, opt_state, metrics = step(
                state["params"], state["opt_state"], make_global_batch(batch, mesh)
            )
            state = {"params": params, "opt_state": opt_state}
            losses.append(float(metrics["loss"]))
    return state, losses


def test_muon_run_resumes_bitwise_and_restores_onto_another_mesh(tmp_path):
    run = Run(parse(tiny_resume.get_config()).run)  # the AdEMAMix run gives the data, schedule and mesh
    config = run.config.replace(optim=dataclasses.replace(run.config.optim, name="muon"))
    source = run.batch_source()
    batches = [next(source) for _ in range(STEPS)]  # 4 rows of 64 tokens of the UDHR each
    step, abstract, init = _muon_step(config, run.mesh, run.lr_schedule)

    reference, reference_losses = _train(step, init(), batches, run.mesh)

    first, first_losses = _train(step, init(), batches[:SAVED_AT], run.mesh)
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(tmp_path / "saved", first)
    checkpointer.wait_until_finished()
    restored = checkpointer.restore(tmp_path / "saved", abstract)
    resumed, resumed_losses = _train(step, restored, batches[SAVED_AT:], run.mesh)

    assert first_losses + resumed_losses == reference_losses  # float equality of every loss
    jax.tree.map(np.testing.assert_array_equal, jax.device_get(resumed), jax.device_get(reference))
    assert reference_losses[-1] < reference_losses[0] - 0.3  # it learns: 6.93 -> 5.88 nats

    other_mesh = make_mesh(1, 4, 2, jax.devices()[:8])  # the run's mesh is fsdp 2 x tensor 4
    other_step, other_abstract, _ = _muon_step(config, other_mesh, run.lr_schedule)
    moved = checkpointer.restore(tmp_path / "saved", other_abstract)
    assert moved["params"]["layers"][0]["mlp"]["up"].sharding.spec == P("fsdp", "tensor")
    elsewhere, elsewhere_losses = _train(other_step, moved, batches[SAVED_AT:], other_mesh)
    np.testing.assert_allclose(elsewhere_losses, resumed_losses, rtol=1e-6, atol=0)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=0, atol=1e-6),
        jax.device_get(elsewhere),
        jax.device_get(reference),
    )
