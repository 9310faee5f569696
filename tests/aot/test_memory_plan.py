"""apertus_jax.aot.memory_plan on the tiny demo config over the 8 virtual CPU devices of the test session, and
the table `experiments.memory_plan` prints."""

import json

import jax
import optax
import pytest

from apertus_jax.aot import memory_plan
from apertus_jax.config.schema import parse
from apertus_jax.models import flops
from apertus_jax.models.transformer import param_logical_axes
from apertus_jax.optim.orthogonal import muon_dimension_numbers
from configs.runs import apertus_8b, tiny_demo

FLOAT32_BYTES = 4


@pytest.fixture(scope="module")
def config():
    return parse(tiny_demo.get_config())


def _analytical_param_bytes(model, fsdp: int, tensor: int) -> int:
    """Float32 parameter bytes per device from the ModelConfig shapes and the rule table
    (apertus_jax/models/partitioning.py): matrices and embeddings are split over fsdp x tensor, the
    d_model-sized norm scales over fsdp only, the per-head q/k norm scales and the two xIELU scalars of each
    layer are replicated; k/v projections fall back to fsdp only when the kv heads do not divide over tensor."""
    norms = (2 * model.n_layers + 1) * model.d_model
    replicated = model.n_layers * (2 * model.head_dim + 2)
    kv = 2 * model.n_layers * model.d_model * model.n_kv_heads * model.head_dim
    kv_tensor = tensor if model.n_kv_heads % tensor == 0 else 1
    matrices = flops.param_count(model) - norms - replicated - kv
    return FLOAT32_BYTES * (
        matrices // (fsdp * tensor) + kv // (fsdp * kv_tensor) + norms // fsdp + replicated
    )


# (1, 2, 4): 2 kv heads do not divide over tensor 4 (the fallback rule of partitioning.py).
@pytest.mark.parametrize("mesh_shape", [(1, 1, 1), (1, 8, 1), (2, 2, 2), (1, 2, 4)])
def test_state_bytes_per_device_match_the_analytical_count(config, mesh_shape):
    spec, _, _ = memory_plan.state_spec(config, mesh_shape)
    model = config.model
    params, opt_state = (memory_plan.shard_bytes(spec.abstract[k]) for k in ("params", "opt_state"))
    assert params == _analytical_param_bytes(model, *mesh_shape[1:])
    if mesh_shape == (1, 1, 1):
        assert params == FLOAT32_BYTES * flops.param_count(model)
    # AdEMAMix keeps three float32 moments per parameter (fast and slow EMA, second moment) plus step counters.
    assert 0 <= opt_state - 3 * params < 1024


@pytest.mark.slow
def test_compiled_plan(config):
    one, two = (memory_plan.plan_one(config, (2, 2, 2), rows_per_device=r) for r in (1, 2))
    assert one["params"] == two["params"] == _analytical_param_bytes(config.model, 2, 2)
    assert one["rows"] == 4 and two["rows"] == 8
    assert one["total"] >= one["params"] + one["opt_state"] + one["activations"]
    assert one["activations"] >= one["params"]  # at least the float32 gradient of the local shard
    # One more row per device needs at least its float32 logits ([T, V / tensor]) for the loss.
    logits_bytes = config.data.seq_len * config.model.vocab_size // 2 * FLOAT32_BYTES
    assert two["activations"] - one["activations"] >= logits_bytes


def test_mesh_argument_errors():
    assert memory_plan.parse_mesh("1x64x4") == (1, 64, 4)
    for bad in ("64", "1x64", "1x0x4", "ax1x1"):
        with pytest.raises(ValueError, match="DATAxFSDPxTENSOR"):
            memory_plan.parse_mesh(bad)
    with pytest.raises(ValueError, match="needs 16 devices, 8 exist"):
        memory_plan.state_spec(parse(tiny_demo.get_config()), (1, 16, 1))


def test_every_flag_value_is_checked_before_the_first_line(config):
    """Before: the title and header (and an ademamix row, compiled) came out first, then the error of a mesh
    the batch does not divide, or of an unknown optimizer naming optim.name instead of --optimizers."""
    lines = memory_plan.plan_lines(config, "tiny", [(1, 2, 1), (1, 7, 1)])
    with pytest.raises(ValueError) as mesh:
        next(lines)
    assert str(mesh.value) == (
        "mesh 1x7x1: train.batch_plan: a batch of 16 rows is not divisible by the data*fsdp mesh axes (7); "
        "change the batch or --config.mesh.*"
    )
    with pytest.raises(ValueError, match=r"^mesh 1x16x1 needs 16 devices, 8 exist$"):
        next(memory_plan.plan_lines(config, "tiny", [(1, 16, 1)]))
    lines = memory_plan.optimizer_lines(config, "tiny", [(1, 2, 1)], ["ademamix", "adam"])
    with pytest.raises(ValueError) as optimizer:
        next(lines)
    assert str(optimizer.value) == (
        "--optimizers=ademamix,adam: unknown 'adam'; use adamw, ademamix, lion, muon"
    )


@pytest.mark.slow
def test_context_axis_splits_activations_and_parameters():
    """1,024-token rows of the tiny demo model, where a row's activations outweigh the weights' gradients."""
    assert memory_plan.parse_mesh("1x16x1x4") == (1, 16, 1, 4)
    config = tiny_demo.get_config()
    with config.unlocked():
        config.data.seq_len = config.model.max_seq_len = 1024
        config.train.batch_plan = ((0, 2 * 1024),)
    config = parse(config)
    plain, split = (
        memory_plan.plan_one(config, shape, rows_per_device=1) for shape in ((1, 2, 1), (1, 2, 1, 4))
    )
    # Weights split over fsdp x context (8 ways) instead of fsdp (2 ways); q/k norm scales replicated.
    assert 0.25 * plain["params"] <= split["params"] < 0.26 * plain["params"]
    assert 0 <= split["opt_state"] - 3 * split["params"] < 1024
    assert split["rows"] == plain["rows"] == 2
    # Each device keeps a quarter of every row's activations (the K/V of a layer are gathered whole).
    assert split["activations"] < 0.6 * plain["activations"]


def test_mesh_shapes_default_per_model_size(config):
    assert memory_plan.mesh_shapes(config, ["1x8x1", "2x2x2x1"]) == [(1, 8, 1), (2, 2, 2, 1)]
    eight_b = parse(apertus_8b.get_config())
    assert memory_plan.mesh_shapes(eight_b) == [(1, 64, 1), (1, 16, 4)]
    with pytest.raises(ValueError, match="no default meshes for this model size"):
        memory_plan.mesh_shapes(config)
    with pytest.raises(ValueError, match="DATAxFSDPxTENSOR"):
        memory_plan.mesh_shapes(config, ["1x8"])


@pytest.mark.slow
def test_plan_lines_are_a_table_of_the_plan(config, tmp_path):
    path = str(tmp_path / "plan.json")
    lines = list(memory_plan.plan_lines(config, "tiny", [(2, 2, 2)], rows_per_device=1, json_path=path))
    assert (
        len(lines) == 6
        and lines[0].startswith("tiny: the training loop's own step (")
        and "seq_len" in lines[0]
    )
    assert lines[1].count("|") == 9 and lines[2] == "|" + "---|" * 8
    plan = memory_plan.plan_one(config, (2, 2, 2), rows_per_device=1)
    cells = [c.strip() for c in lines[3].split("|")]
    assert cells[1] == f"2x2x2 (8 dev; batch {plan['batch_rows']} rows = {plan['microbatches']} x 4)"
    assert cells[2:6] == [f"{plan[k] / 1e9:.2f}" for k in ("params", "opt_state", "activations", "total")]
    assert cells[6:9] == ["yes", "yes", "yes"]
    assert lines[4].startswith("Train with the same microbatches:") and lines[5] == f"wrote {path}"
    with open(path) as f:
        (written,) = json.load(f)
    assert {k: v for k, v in written.items() if k not in ("compile_s", "fits")} == {
        k: v for k, v in plan.items() if k != "compile_s"
    }
    assert written["fits"] == dict.fromkeys(memory_plan.DEVICE_MEMORY_GB, True)


def test_collective_bytes_reads_compiled_hlo():
    hlo = "\n".join(
        [
            "  %all-gather.1 = f32[4,8]{1,0} all-gather(f32[2,8]{1,0} %p), replica_groups={{0,1}}, dimensions={0}",
            "  %all-reduce.2 = (f32[2]{0}, bf16[4]{0}) all-reduce(f32[2]{0} %a, bf16[4]{0} %b), to_apply=%add",
            "  %all-reduce.3 = f32[] all-reduce(f32[] %c), to_apply=%add",
            "  %dot.4 = f32[4,4]{1,0} dot(f32[4,8]{1,0} %all-gather.1, f32[8,4]{1,0} %w)",
        ]
    )
    found = memory_plan.collective_bytes(hlo)
    assert found["all-gather"] == (1, 4 * 8 * 4)
    assert found["all-reduce"] == (2, 2 * 4 + 4 * 2 + 4)
    assert found["reduce-scatter"] == found["all-to-all"] == found["collective-permute"] == (0, 0)


@pytest.mark.slow
def test_optimizer_state_per_device_ademamix_three_moments_muon_one_per_matrix(config):
    """fsdp 2 x tensor 4: Muon keeps one moment per matrix, AdamW's two per embedding, lm_head and norm."""
    spec, _, _ = memory_plan.state_spec(config, (1, 2, 4))
    numbers = muon_dimension_numbers(param_logical_axes(config.model))
    per_param = jax.tree.map(lambda x: memory_plan.shard_bytes([x]), spec.abstract["params"])
    is_number = lambda x: x is None or isinstance(x, optax.contrib.MuonDimensionNumbers)  # noqa: E731
    moments = jax.tree.map(lambda n, b: b * (2 if n is None else 1), numbers, per_param, is_leaf=is_number)
    params = sum(jax.tree.leaves(per_param))
    ademamix, muon = (memory_plan.optimizer_plan(config, (1, 2, 4), name) for name in ("ademamix", "muon"))
    assert 0 <= ademamix["opt_state"] - 3 * params < 1024
    assert 0 <= muon["opt_state"] - sum(jax.tree.leaves(moments)) < 1024
    assert muon["opt_state"] < 0.6 * ademamix["opt_state"]
    # AdEMAMix's update is elementwise: only clipping's global-norm reduction; Newton-Schulz on split
    # matrices gathers them.
    assert ademamix["collectives"]["all-gather"] == (0, 0) and ademamix["collectives"]["all-reduce"][0] >= 1
    assert muon["collectives"]["all-gather"][0] > 0


@pytest.mark.slow
def test_optimizer_lines_are_a_table(config, tmp_path):
    path = str(tmp_path / "optimizers.json")
    lines = list(memory_plan.optimizer_lines(config, "tiny", [(1, 8, 1)], ["ademamix", "muon"], path))
    assert lines[0].startswith("tiny: optimizer state and the collectives") and len(lines) == 6
    assert lines[1].count("|") == 5 and lines[2] == "|---|---|---|---|"
    cells = [[c.strip() for c in line.split("|")[1:4]] for line in lines[3:5]]
    assert [c[:2] for c in cells] == [["1x8x1 (8 dev)", "ademamix"], ["1x8x1 (8 dev)", "muon"]]
    assert "all-gather" in lines[4] and "all-gather" not in lines[3] and lines[5] == f"wrote {path}"
    with open(path) as f:
        written = json.load(f)
    assert [(r["mesh"], r["devices"], r["optimizer"]) for r in written] == [
        ("1x8x1", 8, "ademamix"),
        ("1x8x1", 8, "muon"),
    ]
    gathered = written[1]["collectives"]["all-gather"]
    assert f"{gathered['ops']} all-gather ({gathered['bytes'] / 1e9:.2f})" in lines[4]
    assert (
        cells[1][2] == f"{written[1]['opt_state'] / 1e9:.2f}"
        and "all-gather" not in written[0]["collectives"]
    )
    with pytest.raises(ValueError, match="optim.name must be one of"):
        memory_plan.optimizer_plan(config, (1, 8, 1), "sgd")
