"""HF interop: logits parity with `transformers.ApertusForCausalLM` and `LlamaForCausalLM` in both directions.

Every HF parameter is re-drawn (norm weights around 1, xIELU `alpha_p`/`alpha_n` away from init, matrices
large enough for O(1) logits) so a swapped, transposed or dropped tensor shows up as a logit difference.
Inputs are UTF-8 bytes of UDHR sentences (vocab 256 = byte ids).
"""

import json

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from apertus_jax.models.generate import generate
from apertus_jax.models.hf import config_from_hf, config_to_hf, from_hf, load_hf, save_hf
from apertus_jax.models.presets import get_config
from apertus_jax.models.transformer import Apertus, create_model, export_weights, import_weights

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TOLERANCE = 1e-4
SEQ_LEN = 64
TEXTS = (
    "Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft und Gewissen begabt.",
    "All human beings are born free and equal in dignity and rights. They are endowed with reason and conscience.",
)

LLAMA3_SMALL_ORIG = {
    "rope_type": "llama3",
    "rope_theta": 10_000.0,
    "factor": 8.0,
    "original_max_position_embeddings": 16,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
}
HF_CONFIGS = {
    # kv_heads = 1, head_dim 24 (not a power of two), llama3 scaling with positions 0..63 beyond orig = 16:
    # the 12 frequencies cover all three llama3 regimes (kept, interpolated, divided by factor).
    "mqa_hd24_llama3": dict(
        vocab_size=256,
        hidden_size=48,
        intermediate_size=80,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=24,
        rope_parameters=LLAMA3_SMALL_ORIG,
        max_position_embeddings=64,
    ),
    # GQA 4/2, plain RoPE with the pretraining theta, three layers.
    "gqa_default_rope": dict(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        rope_parameters={"rope_type": "default", "rope_theta": 500_000.0},
        max_position_embeddings=128,
    ),
    # heads * head_dim (40) != hidden_size (32), tied embeddings, llama3 with orig 32.
    "tied_hd20": dict(
        vocab_size=256,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=20,
        tie_word_embeddings=True,
        rope_parameters={**LLAMA3_SMALL_ORIG, "original_max_position_embeddings": 32},
        max_position_embeddings=64,
    ),
}


LLAMA_CONFIGS = {
    # GQA 4/2, untied, plain RoPE (the tiny-llama / boldt baseline shape, scaled down).
    "llama_gqa_default_rope": dict(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
        rms_norm_eps=1e-5,
        max_position_embeddings=64,
    ),
    # MQA, head_dim 24 with heads * head_dim != hidden_size, tied embeddings, llama3 RoPE scaling.
    "llama_mqa_tied_llama3": dict(
        vocab_size=256,
        hidden_size=40,
        intermediate_size=72,
        num_hidden_layers=3,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=24,
        tie_word_embeddings=True,
        rope_parameters=LLAMA3_SMALL_ORIG,
        max_position_embeddings=64,
    ),
}


def text_tokens() -> np.ndarray:
    """`[2, SEQ_LEN]` int32 byte ids of two real sentences."""
    return np.stack([np.frombuffer(t.encode("utf-8")[:SEQ_LEN], np.uint8) for t in TEXTS]).astype(np.int32)


def random_hf_model(hf_kwargs: dict, seed: int = 0, llama: bool = False):
    """A float32 eager-attention `ApertusForCausalLM` (or `LlamaForCausalLM`) with every parameter re-drawn
    (see module docstring)."""
    if llama:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**hf_kwargs)).eval()
    else:
        model = transformers.ApertusForCausalLM(transformers.ApertusConfig(**hf_kwargs)).eval()
    model.set_attn_implementation("eager")
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if name.endswith(("alpha_p", "alpha_n")):
                p.add_(0.5 * noise)
            elif p.ndim == 1:
                p.copy_(1.0 + 0.2 * noise)
            else:
                p.copy_(noise / p.shape[-1] ** 0.5)
    return model


def hf_logits(model, tokens: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(input_ids=torch.from_numpy(tokens).long()).logits.numpy()


@nnx.jit
def _forward(model, tokens, positions, segment_ids):
    return model(tokens, positions, segment_ids)


def our_logits(model: Apertus, tokens: np.ndarray) -> np.ndarray:
    b, t = tokens.shape
    positions = np.broadcast_to(np.arange(t, dtype=np.int32), (b, t))
    return np.asarray(
        _forward(model, jnp.asarray(tokens), jnp.asarray(positions), jnp.ones((b, t), jnp.int32))
    )


def hf_state_dict(model) -> dict[str, np.ndarray]:
    return {name: t.detach().numpy() for name, t in model.state_dict().items()}


def perturb(model: Apertus, seed: int) -> None:
    """Move every parameter of `model` in place, on our side, so an export carries weights HF never had."""
    rng = np.random.default_rng(seed)
    weights = {name: np.asarray(w) for name, w in export_weights(model).items()}
    import_weights(
        model,
        {
            name: w + 0.1 * np.std(w + 1.0) * rng.standard_normal(w.shape).astype(np.float32)
            for name, w in weights.items()
        },
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, scan_layers",
    [("mqa_hd24_llama3", False), ("mqa_hd24_llama3", True), ("gqa_default_rope", True), ("tied_hd20", False)],
)
def test_parity_with_transformers_both_directions(name, scan_layers, tmp_path):
    hf_model = random_hf_model(HF_CONFIGS[name])
    tokens = text_tokens()
    reference = hf_logits(hf_model, tokens)
    assert np.abs(reference).max() > 1.0  # logits of real size, so the absolute bound means something

    ours = from_hf(hf_state_dict(hf_model), hf_model.config.to_dict(), scan_layers=scan_layers)
    import_diff = np.abs(our_logits(ours, tokens) - reference).max()
    assert import_diff <= TOLERANCE, f"{name}: HF -> ours max abs logit diff {import_diff}"

    perturb(ours, seed=1)
    expected = our_logits(ours, tokens)
    assert np.abs(expected - reference).max() > 1e-2  # the export below really carries new weights
    save_hf(ours, tmp_path)
    reloaded, info = transformers.ApertusForCausalLM.from_pretrained(
        tmp_path, dtype=torch.float32, attn_implementation="eager", output_loading_info=True
    )
    assert not any(info.values()), info  # no missing, unexpected or mismatched tensors
    export_diff = np.abs(hf_logits(reloaded.eval(), tokens) - expected).max()
    assert export_diff <= TOLERANCE, f"{name}: ours -> HF max abs logit diff {export_diff}"
    print(f"{name} scan={scan_layers}: import {import_diff:.2e}, export {export_diff:.2e}")


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, scan_layers", [("llama_gqa_default_rope", False), ("llama_mqa_tied_llama3", True)]
)
def test_llama_parity_with_transformers_both_directions(name, scan_layers, tmp_path):
    hf_model = random_hf_model(LLAMA_CONFIGS[name], llama=True)
    tokens = text_tokens()
    reference = hf_logits(hf_model, tokens)
    assert np.abs(reference).max() > 1.0

    ours = from_hf(hf_state_dict(hf_model), hf_model.config.to_dict(), scan_layers=scan_layers)
    assert (ours.config.mlp_type, ours.config.qk_norm) == ("swiglu", False)
    import_diff = np.abs(our_logits(ours, tokens) - reference).max()
    assert import_diff <= TOLERANCE, f"{name}: HF -> ours max abs logit diff {import_diff}"

    perturb(ours, seed=2)
    expected = our_logits(ours, tokens)
    assert np.abs(expected - reference).max() > 1e-2
    save_hf(ours, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    reloaded, info = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, dtype=torch.float32, attn_implementation="eager", output_loading_info=True
    )
    assert type(reloaded).__name__ == "LlamaForCausalLM"
    assert not any(info.values()), info
    export_diff = np.abs(hf_logits(reloaded.eval(), tokens) - expected).max()
    assert export_diff <= TOLERANCE, f"{name}: ours -> HF max abs logit diff {export_diff}"
    print(f"{name} scan={scan_layers}: import {import_diff:.2e}, export {export_diff:.2e}")


@pytest.mark.slow
def test_tiny_llama_preset_exports_and_reloads(tmp_path):
    """The `tiny-llama` preset itself (SwiGLU, no QK-norm, untied) exports to a Llama checkpoint that
    transformers and `load_hf` both read back with our logits."""
    model = create_model(get_config("tiny-llama", vocab_size=256), seed=4)
    perturb(model, seed=4)  # norms away from 1, so a swapped input/post-attention norm shows up
    tokens = text_tokens()
    expected = our_logits(model, tokens)
    save_hf(model, tmp_path)
    reloaded = transformers.LlamaForCausalLM.from_pretrained(
        tmp_path, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    assert np.abs(hf_logits(reloaded, tokens) - expected).max() <= TOLERANCE
    loaded = load_hf(tmp_path)
    assert loaded.config == model.config
    for key, w in export_weights(model).items():
        np.testing.assert_array_equal(np.asarray(w), np.asarray(export_weights(loaded)[key]), err_msg=key)


def test_legacy_llama_rotary_buffers_are_ignored():
    hf_model = random_hf_model(LLAMA_CONFIGS["llama_gqa_default_rope"], llama=True)
    state, config = hf_state_dict(hf_model), hf_model.config.to_dict()
    base = our_logits(from_hf(state, config), text_tokens())
    state["model.layers.0.self_attn.rotary_emb.inv_freq"] = np.ones(8, np.float32)
    np.testing.assert_array_equal(our_logits(from_hf(state, config), text_tokens()), base)


def test_xielu_parameters_are_imported_per_layer():
    """Changing one layer's alpha_n in the HF state dict changes our logits: a_n is really read."""
    hf_model = random_hf_model(HF_CONFIGS["mqa_hd24_llama3"])
    state = hf_state_dict(hf_model)
    config = hf_model.config.to_dict()
    tokens = text_tokens()
    base = our_logits(from_hf(state, config), tokens)
    state["model.layers.1.mlp.act_fn.alpha_n"] = state["model.layers.1.mlp.act_fn.alpha_n"] + 1.0
    assert np.abs(our_logits(from_hf(state, config), tokens) - base).max() > 1e-3


@pytest.mark.slow
def test_greedy_generation_matches_transformers_generate():
    """Our KV-cached greedy decoding gives the tokens of `transformers` `generate(do_sample=False)`."""
    hf_model = random_hf_model(HF_CONFIGS["mqa_hd24_llama3"], seed=5)
    ours = from_hf(hf_state_dict(hf_model), hf_model.config.to_dict())
    prompt = text_tokens()[1, :20]
    with torch.no_grad():
        expected = hf_model.generate(
            torch.from_numpy(prompt[None]).long(),
            max_new_tokens=24,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=3,
        )[0, len(prompt) :].numpy()
    assert len(set(expected.tolist())) > 4  # a varied continuation, not one repeated token
    np.testing.assert_array_equal(generate(ours, [prompt], max_new_tokens=24)[0], expected)


@pytest.mark.parametrize("scan_layers", [False, True])
def test_save_load_round_trip_is_exact(scan_layers, tmp_path):
    hf_model = random_hf_model(HF_CONFIGS["gqa_default_rope"], seed=3)
    model = from_hf(hf_state_dict(hf_model), hf_model.config.to_dict(), scan_layers=scan_layers)
    save_hf(model, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    loaded = load_hf(tmp_path, scan_layers=scan_layers)
    assert loaded.config == model.config
    before, after = export_weights(model), export_weights(loaded)
    assert before.keys() == after.keys()
    for key in before:
        np.testing.assert_array_equal(np.asarray(before[key]), np.asarray(after[key]), err_msg=key)


def test_config_round_trip_and_legacy_rope_fields():
    config = get_config("apertus-8b")
    # 4,096-token rows under llama3 scaling from 8,192: HF states the scaled context 8 x 8,192 (hf_max_positions).
    assert config_to_hf(config)["max_position_embeddings"] == 65_536
    assert config_from_hf(config_to_hf(config)) == config.replace(max_seq_len=65_536)
    long_rows = config.replace(max_seq_len=16_384)
    assert config_from_hf(config_to_hf(long_rows)) == long_rows
    for preset in ("boldt-1b", "boldt-350m", "tiny-llama"):
        llama = get_config(preset)
        assert config_to_hf(llama)["model_type"] == "llama"
        assert config_from_hf(config_to_hf(llama)) == llama
    legacy = config_to_hf(config)
    rope = legacy.pop("rope_parameters")
    legacy["rope_theta"] = rope.pop("rope_theta")
    legacy["rope_scaling"] = rope  # transformers 4.x config.json layout of the released checkpoints
    assert config_from_hf(legacy) == config.replace(max_seq_len=65_536)
    assert config_from_hf(config_to_hf(config), scan_layers=True).scan_layers


@pytest.mark.parametrize(
    "change, message",
    [
        ({"hidden_act": "silu"}, "hidden_act"),
        ({"attention_bias": True}, "attention_bias"),
        ({"model_type": "mistral"}, "model_type"),
        ({"model_type": "llama"}, "hidden_act"),
        ({"model_type": "llama", "hidden_act": "silu", "mlp_bias": True}, "mlp_bias"),
        ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}}, "rope_type"),
    ],
)
def test_unsupported_hf_configs_are_rejected(change, message):
    hf_config = {**config_to_hf(get_config("tiny")), **change}
    with pytest.raises(ValueError, match=message):
        config_from_hf(hf_config)


def test_unsupported_exports_and_bad_inputs_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="qk_norm=True"):
        config_to_hf(get_config("tiny-llama", qk_norm=True))
    with pytest.raises(ValueError, match="qk_norm"):
        config_to_hf(get_config("tiny", qk_norm=False))
    hf_model = random_hf_model(HF_CONFIGS["tied_hd20"])
    state, hf_config = hf_state_dict(hf_model), hf_model.config.to_dict()
    del state["model.layers.1.mlp.up_proj.weight"]
    with pytest.raises(ValueError, match="missing HF tensors .*model.layers.1.mlp.up_proj.weight"):
        from_hf(state, hf_config)
    state = hf_state_dict(hf_model)
    state["model.layers.0.self_attn.q_proj.bias"] = np.zeros(40, np.float32)
    with pytest.raises(ValueError, match="unexpected HF tensors .*q_proj.bias"):
        from_hf(state, hf_config)
    del state["model.layers.0.self_attn.q_proj.bias"]
    state["lm_head.weight"] = state["model.embed_tokens.weight"] + 1.0
    with pytest.raises(ValueError, match="tie_word_embeddings"):
        from_hf(state, hf_config)
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_hf(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(hf_config))
    with pytest.raises(FileNotFoundError, match="safetensors"):
        load_hf(tmp_path)
