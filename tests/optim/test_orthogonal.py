"""Muon by logical axes: one step against the reference Newton-Schulz, six against the documented momentum, the Muon/AdamW assignment of the presets,
agreement with optax.contrib.muon, the decay mask, and 8 devices against one."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from apertus_jax.models.partitioning import make_mesh, state_logical_axes
from apertus_jax.models.presets import PRESET_NAMES, get_config
from apertus_jax.models.transformer import Apertus, param_layout
from apertus_jax.optim.baselines import adamw
from apertus_jax.optim.config import OptimConfig, make_tx
from apertus_jax.optim.decay_mask import default_weight_decay_mask
from apertus_jax.optim.factory import make_optimizer
from apertus_jax.optim.orthogonal import muon, muon_assignment, muon_dimension_numbers, orthogonalization_spec
from apertus_jax.train.train_state import opt_state_shardings

TINY = get_config("tiny", vocab_size=512, scan_layers=True)


def logical_axes(config):
    """The model's parameters' logical axes as a plain tree (the trainer's params layout)."""
    _, state = nnx.split(nnx.eval_shape(lambda: Apertus(config, rngs=nnx.Rngs(0))), nnx.Param)
    return nnx.to_pure_dict(state_logical_axes(state))


def reference_newton_schulz(g_out_in, steps=5):
    """Our transcription of Keller Jordan's `zeropower_via_newtonschulz5` (KellerJordan/Muon, muon.py) for a
    torch-layout [out, in] matrix, in float32 where the reference runs bfloat16."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g_out_in
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    x = x / (jnp.linalg.norm(x) + 1e-7)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(96, 64), (64, 96)], ids=["in>out", "in<out"])
@pytest.mark.parametrize("rms", [0.0, 0.2], ids=["reference-scaling", "rms-matching"])
def test_one_step_from_zero_state_is_the_reference_newton_schulz(shape, rms):
    """A Muon step on one [in, out] kernel: -lr (scale * NS(g) + wd * w), the documented shape scaling."""
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.normal(size=shape), jnp.float32)
    g = jnp.asarray(rng.normal(size=shape), jnp.float32)
    lr, wd = 0.02, 0.1
    tx = muon(lr, {"w": ("embed", "mlp")}, rms=rms, weight_decay=wd)
    step, _ = tx.update({"w": g}, tx.init({"w": w}), {"w": w})

    fan_in, fan_out = shape
    orthogonal = reference_newton_schulz(g.T).T  # the reference works on the torch layout [out, in]
    scale = rms * np.sqrt(max(fan_in, fan_out)) if rms else np.sqrt(max(1, fan_out / fan_in))
    expected = -lr * (scale * orthogonal + wd * w)
    np.testing.assert_allclose(step["w"], expected, rtol=0, atol=5e-8)  # measured <= 2e-8; steps ~1e-2
    # The orthogonalized direction is not the gradient: its singular values are all near 1 (0.68 to 1.13).
    singular = np.linalg.svd(np.asarray(orthogonal), compute_uv=False)
    assert 0.6 < singular.min() and singular.max() < 1.2


def documented_momentum(grads, beta, bias_corrected=True):
    """The Muon input of each step by docs/optimizers.md ("The momentum"), written out in float64: the average
    m_t = beta m_(t-1) + (1 - beta) g_t and its Nesterov look-ahead beta m_t + (1 - beta) g_t, each term divided
    by its own bias correction (optax's form, t counted from 1), or by none (Keller Jordan's form)."""
    m, out = np.zeros_like(grads[0], np.float64), []
    for t, g in enumerate(grads, start=1):
        m = beta * m + (1 - beta) * g
        if bias_corrected:
            out.append(beta * m / (1 - beta ** (t + 1)) + (1 - beta) * g / (1 - beta**t))
        else:
            out.append(beta * m + (1 - beta) * g)
    return out


@pytest.mark.slow
def test_six_steps_follow_the_documented_bias_corrected_nesterov_momentum():
    """Six steps on one [in, out] kernel with new gradients each step: every update is -lr (scale * NS(input) +
    wd * w) of the documented momentum; Keller Jordan's uncorrected form gives the same first step (the
    iteration normalizes its input) and measurably different later ones."""
    rng = np.random.default_rng(1)
    shape, lr, wd, beta, rms = (64, 96), 0.02, 0.1, 0.95, 0.2
    grads = [rng.normal(size=shape) for _ in range(6)]
    w = jnp.asarray(rng.normal(size=shape), jnp.float32)
    tx = muon(lr, {"w": ("embed", "mlp")}, momentum=beta, rms=rms, weight_decay=wd)
    state, scale = tx.init({"w": w}), rms * np.sqrt(max(shape))
    ours, expected, uncorrected = [], [], []
    for g, corrected, plain in zip(
        grads, documented_momentum(grads, beta), documented_momentum(grads, beta, False)
    ):
        step, state = tx.update({"w": jnp.asarray(g, jnp.float32)}, state, {"w": w})
        ours.append(np.asarray(step["w"]))
        for inputs, updates in ((corrected, expected), (plain, uncorrected)):
            orthogonal = reference_newton_schulz(jnp.asarray(inputs.T, jnp.float32)).T
            updates.append(np.asarray(-lr * (scale * orthogonal + wd * w)))
        w = w + step["w"]
    for step_ours, step_expected in zip(ours, expected):
        np.testing.assert_allclose(step_ours, step_expected, rtol=0, atol=1e-7)  # steps ~1e-2
    gaps = [np.abs(a - b).max() for a, b in zip(ours, uncorrected)]
    assert gaps[0] < 1e-7 and min(gaps[1:]) > 1e-4, gaps


TINY_ASSIGNMENT = {
    "['embed']": "adam",
    "['final_norm']['weight']": "adam",
    "['layers']['attn']['k_norm']['weight']": "adam",
    "['layers']['attn']['k_proj']": "muon: embed -> kv_heads x head_dim",
    "['layers']['attn']['o_proj']": "muon: heads x head_dim -> embed",
    "['layers']['attn']['q_norm']['weight']": "adam",
    "['layers']['attn']['q_proj']": "muon: embed -> heads x head_dim",
    "['layers']['attn']['v_proj']": "muon: embed -> kv_heads x head_dim",
    "['layers']['attn_norm']['weight']": "adam",
    "['layers']['mlp']['act']['a_n']": "adam",
    "['layers']['mlp']['act']['a_p']": "adam",
    "['layers']['mlp']['down']": "muon: mlp -> embed",
    "['layers']['mlp']['up']": "muon: embed -> mlp",
    "['layers']['mlp_norm']['weight']": "adam",
    "['lm_head']": "adam",
}


def test_tiny_preset_assignment_scanned_and_per_layer():
    assert muon_assignment(logical_axes(TINY)) == TINY_ASSIGNMENT
    # The scanned "layers" axis is a batch axis: each layer's matrix is orthogonalized alone.
    numbers = muon_dimension_numbers(logical_axes(TINY))
    assert numbers["layers"]["attn"]["q_proj"] == optax.contrib.MuonDimensionNumbers((1,), (2, 3))
    assert numbers["layers"]["attn"]["o_proj"] == optax.contrib.MuonDimensionNumbers((1, 2), (3,))
    per_layer = muon_assignment(logical_axes(get_config("tiny", vocab_size=512)))
    expected = {
        key.replace("['layers']", f"['layers'][{i}]"): value
        for key, value in TINY_ASSIGNMENT.items()
        for i in (range(2) if key.startswith("['layers']") else [None])
    }
    assert per_layer == expected


def test_llama_preset_assignment_adds_the_gate_and_drops_qk_norm_and_xielu():
    listing = muon_assignment(logical_axes(get_config("tiny-llama", scan_layers=True, tie_embeddings=True)))
    assert listing["['layers']['mlp']['gate']"] == "muon: embed -> mlp"
    assert sorted(k for k, v in listing.items() if v == "adam") == [
        "['embed']",
        "['final_norm']['weight']",
        "['layers']['attn_norm']['weight']",
        "['layers']['mlp_norm']['weight']",
    ]


@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_every_preset_parameter_is_assigned_by_the_rule(preset):
    """Every Apertus and Llama-style preset: projections and MLP kernels to Muon, everything else to AdamW."""
    config = get_config(preset, scan_layers=True, n_layers=2)  # names do not depend on sizes; short traces
    listing = muon_assignment(logical_axes(config))
    by_name = {}
    for path, branch in listing.items():
        by_name.setdefault(path.rsplit("['", 1)[-1].rstrip("']"), set()).add(branch.split(":")[0])
    matrices = {"q_proj", "k_proj", "v_proj", "o_proj", "up", "down"} | (
        {"gate"} if config.mlp_type == "swiglu" else set()
    )
    assert {name for name, branches in by_name.items() if branches == {"muon"}} == matrices
    assert {name for name, branches in by_name.items() if branches == {"adam"}} <= {
        "embed",
        "lm_head",
        "weight",
        "a_p",
        "a_n",
    }
    assert all(len(branches) == 1 for branches in by_name.values())


def test_a_matrix_the_rule_cannot_read_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"parameter \['w'\] with logical axes \('mlp', 'heads'\)"):
        muon_dimension_numbers({"w": ("mlp", "heads")})
    with pytest.raises(ValueError, match="'embed' exactly once"):
        muon_dimension_numbers({"w": ("embed", "mlp", "embed")})
    with pytest.raises(ValueError, match="needs the parameters' logical axes"):
        make_tx(OptimConfig(name="muon"), 1e-3)


@pytest.fixture(scope="module")
def tiny():
    """The scanned tiny model's logical axes, initial parameters and three gradients (one device)."""
    layout = param_layout(TINY, make_mesh(1, 1, 1, jax.devices()[:1]))
    params = jax.jit(layout.create)()
    rng = np.random.default_rng(0)
    grads = [
        jax.tree.map(lambda p: jnp.asarray(rng.normal(size=p.shape), jnp.float32), params) for _ in range(3)
    ]
    return logical_axes(TINY), params, grads


@pytest.mark.slow
def test_muon_parameters_move_as_optax_contrib_muon_and_the_rest_as_adamw(tiny):
    axes, params, grads = tiny
    numbers = muon_dimension_numbers(axes)
    ours = muon(1e-2, axes, rms=0.2)
    contrib = optax.contrib.muon(1e-2, muon_weight_dimension_numbers=numbers, consistent_rms=0.2)
    plain = adamw(1e-2)
    states = [tx.init(params) for tx in (ours, contrib, plain)]
    updates = [jax.jit(tx.update) for tx in (ours, contrib, plain)]
    for g in grads:
        (u_ours, u_contrib, u_plain), states = zip(
            *[update(g, s, params) for update, s in zip(updates, states)]
        )
        # Per parameter: Muon's leaves from optax.contrib.muon, AdamW's from plain AdamW (not Nesterov).
        reference = jax.tree.map(
            lambda n, c, a: a if n is None else c,
            numbers,
            u_contrib,
            u_plain,
            is_leaf=lambda x: x is None or isinstance(x, optax.contrib.MuonDimensionNumbers),
        )
        jax.tree.map(np.testing.assert_array_equal, u_ours, reference)
    assert not np.array_equal(u_ours["embed"], u_contrib["embed"])  # optax's own AdamW branch differs


@pytest.mark.slow
def test_weight_decay_follows_the_default_mask(tiny):
    """With zero gradients both branches' directions are 0: the step is -lr * wd * w exactly where decayed."""
    axes, params, _ = tiny
    tx = make_optimizer("muon", 0.5, weight_decay=0.1, clip_norm=1.0, logical_axes=axes, rms=0.2)
    step, _ = jax.jit(tx.update)(jax.tree.map(jnp.zeros_like, params), tx.init(params), params)
    mask = default_weight_decay_mask(params)
    decayed = jax.tree.map(lambda p, m: -0.5 * 0.1 * p if m else jnp.zeros_like(p), params, mask)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=0), step, decayed)
    assert mask["embed"] and mask["lm_head"] and mask["layers"]["mlp"]["up"]
    assert not mask["layers"]["attn_norm"]["weight"] and not mask["layers"]["mlp"]["act"]["a_p"]


def test_orthogonalization_spec_keeps_matrices_whole_where_the_layers_allow():
    """Apertus-8B's stacked q_proj [32 layers, 4096, 4096] and k_proj [32, 4096, 1024] on its two meshes."""
    fsdp64 = {"data": 1, "fsdp": 64, "tensor": 1}
    fsdp16_tensor4 = {"data": 1, "fsdp": 16, "tensor": 4}
    # 64 does not divide 32 layers: the contracted (longer) side is split, one all-reduce per iteration.
    assert orthogonalization_spec((32, 4096, 4096), fsdp64) == P(None, None, "fsdp")
    assert orthogonalization_spec((32, 4096, 1024), fsdp64) == P(None, "fsdp", None)
    # 16 devices take 2 layers each, whole along fsdp; tensor splits the longer side.
    assert orthogonalization_spec((32, 4096, 4096), fsdp16_tensor4) == P("fsdp", None, "tensor")
    assert orthogonalization_spec((32, 4096, 1024), fsdp16_tensor4) == P("fsdp", "tensor", None)
    # An axis that divides neither leaves those devices computing the same matrices.
    assert orthogonalization_spec((3, 5, 7), {"fsdp": 2}) == P(None, None, None)


@pytest.mark.slow
def test_8_devices_update_equals_one_device_within_float32_rounding(tiny):
    """fsdp=4 x tensor=2: every Muon matrix is split over both axes (Newton-Schulz on sharded matrices)."""
    axes, params, grads = tiny
    tx = make_optimizer("muon", 1e-2, weight_decay=0.1, clip_norm=1.0, logical_axes=axes, rms=0.2)

    def run(mesh):
        layout = param_layout(TINY, mesh)
        shardings = layout.shardings
        state_shardings = opt_state_shardings(
            tx, jax.eval_shape(tx.init, params), shardings, NamedSharding(mesh, P())
        )
        init = jax.jit(tx.init, in_shardings=(shardings,), out_shardings=state_shardings)
        update = jax.jit(
            lambda g, s, p: (optax.apply_updates(p, (u := tx.update(g, s, p))[0]), u[1]),
            in_shardings=(shardings, state_shardings, shardings),
            out_shardings=(shardings, state_shardings),
        )
        p = jax.device_put(params, shardings)
        s = init(p)
        with jax.set_mesh(
            mesh
        ):  # as the loop runs the step: Newton-Schulz in orthogonalization_spec's layout
            for g in grads:
                p, s = update(jax.device_put(g, shardings), s, p)
        return jax.device_get(p), shardings

    one, _ = run(make_mesh(1, 1, 1, jax.devices()[:1]))
    eight, shardings = run(make_mesh(1, 4, 2, jax.devices()[:8]))
    # During Newton-Schulz the 2 layers lie over tensor, the longer side of each matrix over fsdp.
    assert orthogonalization_spec((2, 128, 384), {"data": 1, "fsdp": 4, "tensor": 2}) == P(
        "tensor", None, "fsdp"
    )
    assert shardings["layers"]["attn"]["q_proj"].spec == P(None, "fsdp", "tensor", None)
    assert shardings["layers"]["mlp"]["down"].spec == P(None, "tensor", "fsdp")
    moved = jax.tree.map(lambda a, b: float(np.max(np.abs(a - b))), eight, one)
    assert max(jax.tree.leaves(moved)) < 2e-7, moved
    assert jax.tree.map(lambda a, b: not np.array_equal(a, b), one, params)["layers"]["attn"]["q_proj"]
