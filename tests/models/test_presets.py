import pytest

from apertus_jax.models.presets import PRESET_NAMES, get_config


def test_apertus_8b_and_70b_shapes_match_spec():
    c8, c70 = get_config("apertus-8b"), get_config("apertus-70b")
    assert (c8.n_layers, c8.d_model, c8.mlp_hidden, c8.n_heads, c8.n_kv_heads, c8.vocab_size) == (
        32,
        4096,
        21504,
        32,
        8,
        131072,
    )
    assert (c70.n_layers, c70.d_model, c70.mlp_hidden, c70.n_heads, c70.n_kv_heads) == (
        80,
        8192,
        43008,
        64,
        8,
    )
    assert c8.head_dim == c70.head_dim == 128
    assert c8.mlp_type == "xielu" and c8.qk_norm and not c8.tie_embeddings


def test_llama_style_presets_are_gated_without_qk_norm():
    for name in ("boldt-350m", "boldt-1b", "tiny-llama", "bench-18m-llama"):
        cfg = get_config(name)
        assert (cfg.mlp_type, cfg.qk_norm, cfg.rope_scaling, cfg.vocab_size) == (
            "swiglu",
            False,
            "none",
            32000,
        )


def test_bench_presets_match_the_brief():
    apertus, llama = get_config("bench-18m-apertus"), get_config("bench-18m-llama")
    for cfg in (apertus, llama):
        assert (
            cfg.vocab_size,
            cfg.d_model,
            cfg.n_layers,
            cfg.n_heads,
            cfg.n_kv_heads,
            cfg.head_dim,
            cfg.max_seq_len,
            cfg.dtype,
        ) == (32000, 256, 2, 4, 4, 64, 256, "float32")
    assert (apertus.mlp_hidden, apertus.mlp_type, llama.mlp_hidden, llama.mlp_type) == (
        1536,
        "xielu",
        1024,
        "swiglu",
    )


def test_ablation_xielu_hidden_is_1_5x_swiglu():
    # Apertus widens the ungated MLP 1.5x so it matches a SwiGLU MLP's parameter count (docs/recipe.md section 1).
    for name in ("apertus-1.5b", "apertus-3b"):
        assert get_config(name).mlp_hidden == 12288 == 1.5 * 8192


def test_overrides_and_unknown_names():
    cfg = get_config("tiny", vocab_size=512, scan_layers=True)
    assert (cfg.vocab_size, cfg.scan_layers, cfg.d_model) == (512, True, 128)
    with pytest.raises(ValueError, match="valid names: apertus-8b") as info:
        get_config("apertus-7b")
    assert all(name in str(info.value) for name in PRESET_NAMES)
    with pytest.raises(ValueError, match="unknown ModelConfig field"):
        get_config("tiny", hidden_size=3)


def test_the_mini_students_are_tied_deeper_and_thinner_at_their_named_sizes():
    """Apertus Mini (docs/recipe.md section 13): 0.5B, 1.5B and 4B students with tied embeddings, deeper and
    thinner than the from-scratch preset of the same count."""
    from apertus_jax.models.flops import param_count

    for name, billions in (("apertus-mini-0.5b", 0.5), ("apertus-mini-1.5b", 1.5), ("apertus-mini-4b", 4.0)):
        config = get_config(name)
        assert config.tie_embeddings and config.mlp_type == "xielu" and config.qk_norm
        assert param_count(config) == pytest.approx(billions * 1e9, rel=0.03), name
    student, scratch = get_config("apertus-mini-1.5b"), get_config("apertus-1.5b")
    assert param_count(student) == pytest.approx(param_count(scratch), rel=0.001)
    assert student.n_layers > 3 * scratch.n_layers and student.d_model < scratch.d_model
