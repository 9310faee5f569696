import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.models import attention
from apertus_jax.models.presets import get_config
from apertus_jax.models.transformer import Apertus, abstract_model, export_weights, import_weights
from apertus_jax.tokenizers import load_tokenizer

SMALL = dict(vocab_size=512)


@pytest.fixture(scope="module")
def sentence_ids():
    """Real tekken ids of a German sentence (without BoD/EoD), e.g. [6080, 40251, ...]."""
    return load_tokenizer("tekken").encode("Die Würde des Menschen ist unantastbar.")[:5]


@functools.cache
def _model(**overrides):
    return Apertus(get_config("tiny", **overrides), rngs=nnx.Rngs(0))


@nnx.jit
def _forward(model, tokens, positions, segments):
    return model(tokens, positions, segments)


def _rows(*rows):
    return tuple(jnp.asarray(np.array(r, np.int32)) for r in rows)


@pytest.mark.slow
@pytest.mark.parametrize("impl", ["xla", "jax_nn", "splash"])
def test_packed_documents_equal_unpacked_runs(impl, sentence_ids, monkeypatch):
    if impl == "splash":  # the real Pallas kernel through its interpreter; T must be a multiple of 128
        monkeypatch.setattr(
            attention, "splash_attention", functools.partial(attention.splash_attention, interpret=True)
        )
    t = 128 if impl == "splash" else 8
    a, b, c = sentence_ids[:3]
    pad = t - 6
    tokens, positions, segments = _rows(
        [[a, b, c, a, b, c] + [0] * pad], [[0, 1, 2, 0, 1, 2] + [0] * pad], [[1, 1, 1, 2, 2, 2] + [0] * pad]
    )
    model = _model(attention_impl=impl)
    logits = np.asarray(_forward(model, tokens, positions, segments))[0]
    alone = np.asarray(
        _forward(
            model,
            *_rows([[a, b, c] + [0] * (t - 3)], [[0, 1, 2] + [0] * (t - 3)], [[1, 1, 1] + [0] * (t - 3)]),
        )
    )[0]
    np.testing.assert_allclose(logits[3:6], logits[0:3], atol=1e-5)
    np.testing.assert_allclose(logits[0:3], alone[:3], atol=1e-5)
    # Perturbing document 1 leaves document 2 unchanged.
    d, e = sentence_ids[3:5]
    perturbed = np.asarray(_forward(model, tokens.at[0, :3].set(jnp.array([d, e, d])), positions, segments))[
        0
    ]
    np.testing.assert_allclose(perturbed[3:6], logits[3:6], atol=1e-6)
    assert np.abs(perturbed[:3] - logits[:3]).max() > 1e-3
    reference = np.asarray(_forward(_model(), tokens, positions, segments))[0]
    np.testing.assert_allclose(logits[:6], reference[:6], atol=1e-5)  # every implementation agrees


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(lengths=st.lists(st.integers(1, 6), min_size=1, max_size=4), seed=st.integers(0, 2**16))
def test_each_segment_equals_its_solo_run(lengths, seed):
    """Property: for any segmentation of a row, each document's logits equal those of the document alone."""
    t = 24
    forward = functools.partial(_forward, _model(**SMALL))
    ids = np.random.default_rng(seed).integers(4, 512, size=sum(lengths))
    segments = np.repeat(np.arange(1, len(lengths) + 1), lengths)
    positions = np.concatenate([np.arange(n) for n in lengths])
    fill = t - len(ids)
    packed = np.asarray(
        forward(
            *_rows([np.r_[ids, [0] * fill]], [np.r_[positions, [0] * fill]], [np.r_[segments, [0] * fill]])
        )
    )[0]
    start = 0
    for n in lengths:
        solo = np.asarray(
            forward(
                *_rows(
                    [np.r_[ids[start : start + n], [0] * (t - n)]],
                    [np.r_[np.arange(n), [0] * (t - n)]],
                    [[1] * n + [0] * (t - n)],
                )
            )
        )[0]
        np.testing.assert_allclose(packed[start : start + n], solo[:n], atol=1e-5)
        start += n


def test_inputs_of_other_shapes_are_refused_in_one_line():
    """1-D rows, or positions / segment_ids of another shape than the tokens: named, before any op."""
    model = _model(**SMALL)
    tokens, positions, segments = _rows([[5, 6, 7, 8]], [[0, 1, 2, 3]], [[1, 1, 1, 1]])
    for args in [(tokens[0], positions[0], segments[0]), (tokens, positions[:, :3], segments)]:
        with pytest.raises(ValueError, match=r"must be \[B, T\] arrays of one shape, got \(") as error:
            model(*args)
        assert "\n" not in str(error.value)


@pytest.mark.slow
def test_fully_padded_row_gives_finite_logits_and_gradients():
    model = _model(**SMALL)
    tokens, positions, segments = _rows(
        [[5, 6, 7, 8], [3, 3, 3, 3]], [[0, 1, 2, 3], [0] * 4], [[1, 1, 1, 1], [0] * 4]
    )

    def loss(m):
        logits = m(tokens, positions, segments)
        return jnp.mean(jax.nn.logsumexp(logits, axis=-1))  # includes the padding row on purpose

    value, grads = nnx.jit(nnx.value_and_grad(loss))(model)
    assert np.isfinite(float(value))
    assert np.isfinite(np.asarray(_forward(model, tokens, positions, segments))).all()
    leaves = jax.tree.leaves(nnx.state(grads))
    assert leaves and all(np.isfinite(np.asarray(g)).all() for g in leaves)


@pytest.mark.slow
def test_scanned_and_unscanned_layers_agree():
    cfg = get_config("tiny", **SMALL)
    plain = Apertus(cfg, rngs=nnx.Rngs(3))
    scanned = Apertus(cfg.replace(scan_layers=True, remat_policy="full"), rngs=nnx.Rngs(3))
    remat_plain = Apertus(cfg.replace(remat_policy="dots_saveable"), rngs=nnx.Rngs(3))
    assert scanned.layers.attn.q_proj.shape == (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.head_dim)
    assert scanned.layers.attn.q_proj.get_metadata()["logical_axes"] == (
        "layers",
        "embed",
        "heads",
        "head_dim",
    )
    scanned_weights = export_weights(scanned)
    for key, value in export_weights(plain).items():
        np.testing.assert_array_equal(np.asarray(scanned_weights[key]), np.asarray(value))
    batch = _rows([[9, 8, 7, 6, 5, 4]], [[0, 1, 2, 0, 1, 2]], [[1, 1, 1, 2, 2, 2]])
    np.testing.assert_allclose(
        np.asarray(_forward(plain, *batch)), np.asarray(_forward(scanned, *batch)), atol=1e-5
    )

    def loss(m):
        return jnp.mean(m(*batch) ** 2)

    (l1, g1), (l2, g2), (l3, g3) = (
        nnx.jit(nnx.value_and_grad(loss))(m) for m in (plain, scanned, remat_plain)
    )
    np.testing.assert_allclose([float(l2), float(l3)], float(l1), rtol=1e-5)
    a_p = np.asarray(g1["layers"][1]["mlp"]["act"]["a_p"][...])
    assert np.abs(a_p).max() > 0
    np.testing.assert_allclose(np.asarray(g2["layers"]["mlp"]["act"]["a_p"][...][1]), a_p, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(g3["layers"][1]["mlp"]["act"]["a_p"][...]), a_p, rtol=1e-4)
    np.testing.assert_allclose(
        np.asarray(g2["layers"]["attn"]["q_proj"][...][0]),
        np.asarray(g1["layers"][0]["attn"]["q_proj"][...]),
        atol=1e-7,
        rtol=1e-4,
    )


@pytest.mark.slow
def test_export_import_roundtrip_across_layouts():
    source = _model(**SMALL)
    weights = export_weights(source)
    assert weights["layers.1.attn.q_norm.weight"].shape == (32,)
    assert weights["layers.0.mlp.act.a_p"].shape == (1,)
    target = Apertus(get_config("tiny", **SMALL, scan_layers=True), rngs=nnx.Rngs(7))
    import_weights(target, weights)
    batch = _rows([[9, 8, 7]], [[0, 1, 2]], [[1, 1, 1]])
    np.testing.assert_allclose(
        np.asarray(_forward(target, *batch)), np.asarray(_forward(source, *batch)), atol=1e-5
    )
    with pytest.raises(ValueError, match="missing keys"):
        import_weights(target, {k: v for k, v in weights.items() if k != "embed"})
    with pytest.raises(ValueError, match="has shape"):
        import_weights(target, {**weights, "embed": np.zeros((3, 3))})


@pytest.mark.slow
def test_tied_embeddings_and_ablation_switches():
    tied = Apertus(get_config("tiny-llama", vocab_size=64, tie_embeddings=True), rngs=nnx.Rngs(0))
    assert tied.lm_head is None and "lm_head" not in export_weights(tied)
    assert tied.layers[0].attn.q_norm is None and tied.layers[0].mlp.gate is not None
    tokens, positions, segments = _rows([[1, 2, 3]], [[0, 1, 2]], [[1, 1, 1]])
    logits = _forward(tied, tokens, positions, segments)
    assert logits.shape == (1, 3, 64) and logits.dtype == jnp.float32


@pytest.mark.slow
def test_bfloat16_compute_keeps_float32_params_and_logits():
    model = _model(**SMALL, dtype="bfloat16")
    assert all(p.dtype == jnp.float32 for p in jax.tree.leaves(nnx.state(model, nnx.Param)))
    batch = _rows([[9, 8, 7, 6]], [[0, 1, 2, 3]], [[1, 1, 1, 1]])
    logits = _forward(model, *batch)
    assert logits.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(logits), np.asarray(_forward(_model(**SMALL), *batch)), atol=2e-2)


@pytest.mark.parametrize("scan_layers", [False, True])
def test_abstract_model_has_the_graph_shapes_dtypes_and_axes_of_the_model(scan_layers):
    """`abstract_model` traces with a stand-in for `nnx.Rngs`: it must describe the model `Apertus(config,
    rngs=nnx.Rngs(0))` builds, parameter for parameter."""
    config = get_config("tiny", n_layers=3, scan_layers=scan_layers, **SMALL)
    graphdef, abstract = abstract_model(config)
    real_graphdef, real = nnx.split(Apertus(config, rngs=nnx.Rngs(0)), nnx.Param)
    assert graphdef == real_graphdef

    def described(state):
        return {
            path: (var.shape, var.dtype, var.get_metadata()["logical_axes"])
            for path, var in nnx.to_flat_state(state)
        }

    assert described(abstract) == described(real) and len(described(real)) >= 10
