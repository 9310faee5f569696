import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from apertus_jax.models.partitioning import (
    LOGICAL_AXIS_RULES,
    constrain,
    logical_to_spec,
    make_mesh,
    state_logical_axes,
    state_shardings,
)
from apertus_jax.models.presets import get_config
from apertus_jax.models.transformer import Apertus, create_model

MESH_2x2x2 = {"data": 2, "fsdp": 2, "tensor": 2}


def test_rule_table_maxtext_style():
    assert logical_to_spec(("batch", "length", "embed"), (8, 16, 64), MESH_2x2x2) == P(
        ("data", "fsdp"), None, None
    )
    assert logical_to_spec(("embed", "heads", "head_dim"), (64, 4, 32), MESH_2x2x2) == P(
        "fsdp", "tensor", None
    )
    assert logical_to_spec(("vocab", "embed"), (512, 64), MESH_2x2x2) == P("tensor", "fsdp")
    assert logical_to_spec(("layers", "mlp", "embed"), (2, 96, 64), MESH_2x2x2) == P(None, "tensor", "fsdp")


def test_fallback_to_replication():
    mesh = {"data": 1, "fsdp": 4, "tensor": 16}
    # 8 kv heads do not divide over tensor=16; size-1 "data" is skipped; 6 rows do not divide over fsdp=4.
    assert logical_to_spec(("embed", "kv_heads", "head_dim"), (4096, 8, 128), mesh) == P("fsdp", None, None)
    assert logical_to_spec(("batch", "length"), (8, 4), mesh) == P("fsdp", None)
    assert logical_to_spec(("batch", "embed"), (6, 8), mesh) == P(None, "fsdp")
    assert logical_to_spec((None,), (1,), mesh) == P(None)
    with pytest.raises(ValueError, match="no rule"):
        logical_to_spec(("nonsense",), (4,), mesh)


def test_every_parameter_has_logical_axes():
    cfg = get_config("tiny", vocab_size=512, scan_layers=True)
    params = nnx.state(nnx.eval_shape(lambda: Apertus(cfg, rngs=nnx.Rngs(0))), nnx.Param)
    flat = nnx.to_flat_state(params)
    assert len(flat) == 15  # embed, final_norm, lm_head + 12 per layer
    for path, var in flat:
        axes = var.get_metadata()["logical_axes"]
        assert len(axes) == len(var.shape), path
        assert all(name is None or name in LOGICAL_AXIS_RULES for name in axes), path
        assert (axes[0] == "layers") == (path[0] == "layers"), path
    logical = state_logical_axes(params)
    assert logical["layers"]["mlp"]["down"].get_value() == ("layers", "mlp", "embed")


def test_optimizer_state_follows_parameter_shardings():
    model = nnx.eval_shape(lambda: Apertus(get_config("tiny", vocab_size=512), rngs=nnx.Rngs(0)))
    opt = nnx.eval_shape(lambda: nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param))
    shardings = state_shardings(nnx.state(opt), make_mesh(data=2, fsdp=2, tensor=2))
    assert shardings["opt_state"][0]["mu"]["embed"].get_value().spec == P("tensor", "fsdp")
    assert shardings["opt_state"][0]["nu"]["layers"][1]["mlp"]["down"].get_value().spec == P("tensor", "fsdp")
    assert shardings["step"].get_value().spec == P()  # no logical axes: replicated


def test_constrain_is_noop_without_mesh():
    x = jnp.ones((4, 3))
    assert constrain(x, ("batch", "embed")) is x


@pytest.mark.slow
def test_sharded_forward_equals_unsharded(capfd):
    assert len(jax.devices()) == 8, "conftest provides 8 virtual CPU devices"
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    cfg = get_config("tiny", vocab_size=512)
    model = Apertus(cfg, rngs=nnx.Rngs(0))
    rng = np.random.default_rng(0)
    tokens = jnp.asarray(rng.integers(4, 512, size=(4, 8)), jnp.int32)
    positions = jnp.tile(jnp.arange(8, dtype=jnp.int32) % 5, (4, 1))
    segments = jnp.asarray(np.array([[1] * 5 + [2] * 3] * 3 + [[1] * 4 + [0] * 4]), jnp.int32)
    forward = nnx.jit(lambda m, *b: m(*b))
    expected = np.asarray(forward(model, tokens, positions, segments))

    shardings = state_shardings(nnx.state(model), mesh)
    assert shardings["layers"][0]["attn"]["q_proj"].get_value().spec == P("fsdp", "tensor", None)
    assert shardings["embed"].get_value() == NamedSharding(mesh, P("tensor", "fsdp"))
    sharded = create_model(cfg.replace(scan_layers=True), mesh=mesh)  # scanned layout, sharded at creation
    assert sharded.layers.mlp.up[...].sharding.spec == P(None, "fsdp", "tensor")
    batch_sharding = NamedSharding(mesh, P(("data", "fsdp")))
    with jax.set_mesh(mesh):
        logits = forward(sharded, *(jax.device_put(x, batch_sharding) for x in (tokens, positions, segments)))
    assert logits.sharding.spec == P(("data", "fsdp"), None, "tensor")
    assert "Involuntary full rematerialization" not in capfd.readouterr().err  # XLA's SPMD warning
    np.testing.assert_allclose(np.asarray(logits), expected, atol=1e-5)
