"""Batch sharding: rows over ("data", "fsdp"), tensor axis replicated; the global batch from local rows."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from apertus_jax.models import partitioning
from apertus_jax.train.train_state import BATCH_AXES, batch_sharding, make_global_batch


@pytest.mark.parametrize(("data", "fsdp", "tensor"), [(2, 2, 2), (1, 8, 1), (8, 1, 1), (1, 4, 2)])
def test_rows_split_over_data_times_fsdp(data, fsdp, tensor, text_batch):
    mesh = partitioning.make_mesh(data=data, fsdp=fsdp, tensor=tensor)
    sharding = batch_sharding(mesh)
    assert tuple(sharding.spec) == (BATCH_AXES, None)
    rows = 16
    shard_shape = sharding.shard_shape((rows, 24))
    assert shard_shape == (rows // (data * fsdp), 24)  # the length dimension is never split


def test_global_batch_holds_the_local_rows_on_one_process(text_batch):
    mesh = partitioning.make_mesh(data=2, fsdp=2, tensor=2)
    local = text_batch(8, 24)
    batch = make_global_batch(local, mesh)
    assert set(batch) == set(local)
    for key, value in batch.items():
        assert value.shape == (8, 24) and value.dtype == np.int32
        assert value.sharding == batch_sharding(mesh)
        np.testing.assert_array_equal(np.asarray(value), local[key])
    # Rows 0-1 live on the devices of the first (data, fsdp) cell, replicated over the tensor axis.
    first_cell = {d.id for d in mesh.devices[0, 0]}
    tokens = batch["tokens"]
    holders = {s.device.id for s in tokens.addressable_shards if s.index[0] == slice(0, 2)}
    assert holders == first_cell
    assert jax.process_count() == 1


def test_context_axis_splits_the_length_dimension(text_batch):
    mesh = partitioning.make_mesh(data=1, fsdp=2, tensor=1, context=4)
    sharding = batch_sharding(mesh)
    assert tuple(sharding.spec) == (BATCH_AXES, "context")
    assert sharding.shard_shape((8, 64)) == (4, 16)
    batch = make_global_batch(text_batch(8, 64), mesh)
    np.testing.assert_array_equal(np.asarray(batch["tokens"]), text_batch(8, 64)["tokens"])


def _logits_and_grads(model_config, params, batch, mesh):
    """(logits, grads of the mean token loss) of the whole model, jitted under `mesh` with the run's
    parameter and batch shardings (None: one device, no mesh)."""
    from apertus_jax.train.train_state import make_abstract_params

    spec = make_abstract_params(
        model_config, mesh or partitioning.make_mesh(1, 1, 1, jax.devices()[:1]), seed=0
    )

    def fn(p, b):
        def loss(p):
            logits = spec.apply_fn(p, b["tokens"], b["positions"], b["segment_ids"])
            nll = optax.losses.softmax_cross_entropy_with_integer_labels(logits, b["targets"])
            return jnp.sum(nll * b["loss_mask"]) / jnp.sum(b["loss_mask"]), logits

        (_, logits), grads = jax.value_and_grad(loss, has_aux=True)(p)
        return logits, grads

    if mesh is None:
        return jax.jit(fn)(params, batch)
    with jax.set_mesh(mesh):
        params = jax.device_put(params, spec.shardings)
        batch = make_global_batch(batch, mesh)
        return jax.jit(fn)(params, batch)


@pytest.fixture(scope="module")
def packed_rows_and_model():
    """4 packed rows of 64 tokens of German prose from the demo corpus (documents of ~40 tokens, so rows
    hold several and documents cross the context-shard boundaries) and a tiny
    4-head GQA model over the 1,024-id demo BPE."""
    from apertus_jax.data.config import parse_pipeline
    from apertus_jax.data.pipeline import TrainIterator
    from apertus_jax.data.run_tokenizer import demo_tokenizer
    from apertus_jax.models.presets import get_config
    from apertus_jax.train.train_state import make_abstract_params

    prose = {"components": {"demo": {"kind": "demo", "sources": ["german_prose"], "take": 300}}}
    pipeline = TrainIterator(
        parse_pipeline(prose),
        demo_tokenizer(1024),
        seq_len=64,
        batch_size=4,
        process_index=0,
        process_count=1,
        seed=0,
    )
    batch = next(pipeline)
    model_config = get_config(
        "tiny", vocab_size=1024, d_model=32, n_heads=4, n_kv_heads=2, head_dim=8, mlp_hidden=64
    )
    params = make_abstract_params(
        model_config, partitioning.make_mesh(1, 1, 1, jax.devices()[:1]), 0
    ).create()
    return batch, model_config, params, _logits_and_grads(model_config, params, batch, mesh=None)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("data", "fsdp", "tensor", "context"),
    [(1, 2, 2, 2), (1, 1, 2, 4), (1, 1, 1, 8)],
    ids=["fsdp2xtensor2xcontext2", "tensor2xcontext4", "context8"],
)
def test_context_parallel_logits_and_gradients_equal_one_device(
    data, fsdp, tensor, context, packed_rows_and_model
):
    batch, model_config, params, (logits_ref, grads_ref) = packed_rows_and_model
    shard = 64 // context
    segments = batch["segment_ids"]
    boundaries = np.arange(shard, 64, shard)
    # Real packing: at every shard boundary some row continues one document, and several documents share rows.
    crossing = segments[:, boundaries - 1] == segments[:, boundaries]
    assert crossing.any(axis=0).all() and (segments.max(axis=1) > 1).any()
    assert (batch["positions"][:, boundaries][crossing] > 0).all()

    mesh = partitioning.make_mesh(
        data, fsdp, tensor, jax.devices()[: data * fsdp * tensor * context], context
    )
    logits, grads = _logits_and_grads(model_config, params, batch, mesh)
    assert logits.sharding.spec[1] == "context"  # the sequence stays split up to the logits
    assert logits.sharding.shard_shape(logits.shape)[1] == shard
    np.testing.assert_allclose(np.asarray(logits), np.asarray(logits_ref), atol=1e-5, rtol=0)
    flat_ref, flat = jax.tree.leaves(grads_ref), jax.tree.leaves(grads)
    assert len(flat) == len(flat_ref) > 10
    for g, g_ref in zip(flat, flat_ref):
        np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), atol=1e-5, rtol=0)
