"""HuggingFace interop: `transformers` `ApertusForCausalLM` / `LlamaForCausalLM` checkpoints <-> our `Apertus`.

The Apertus architecture (docs/recipe.md section 1: ungated xIELU MLP, QK-norm) maps onto `ApertusForCausalLM`;
the SwiGLU baseline without QK-norm (the Llama / Boldt ablation architecture, `tiny-llama` and `boldt-*`
presets) maps onto `LlamaForCausalLM`. A HF checkpoint is a directory with `config.json` and
`model.safetensors`. Tensor names and layouts:

| HF tensor (`[out, in]` for linears) | ours (`export_weights` name, kernels `[in, out]`) |
| --- | --- |
| `model.embed_tokens.weight` `[V, D]` | `embed` `[V, D]` |
| `model.layers.i.self_attn.q_proj.weight` `[N*H, D]` | `layers.i.attn.q_proj` `[D, N, H]` |
| `model.layers.i.self_attn.{k,v}_proj.weight` `[K*H, D]` | `layers.i.attn.{k,v}_proj` `[D, K, H]` |
| `model.layers.i.self_attn.o_proj.weight` `[D, N*H]` | `layers.i.attn.o_proj` `[N, H, D]` |
| `model.layers.i.self_attn.{q,k}_norm.weight` `[H]` (Apertus) | `layers.i.attn.{q,k}_norm.weight` `[H]` |
| `model.layers.i.attention_layernorm.weight` `[D]` (Apertus) | `layers.i.attn_norm.weight` `[D]` |
| `model.layers.i.input_layernorm.weight` `[D]` (Llama) | `layers.i.attn_norm.weight` `[D]` |
| `model.layers.i.feedforward_layernorm.weight` `[D]` (Apertus) | `layers.i.mlp_norm.weight` `[D]` |
| `model.layers.i.post_attention_layernorm.weight` `[D]` (Llama) | `layers.i.mlp_norm.weight` `[D]` |
| `model.layers.i.mlp.gate_proj.weight` `[F, D]` (Llama) | `layers.i.mlp.gate` `[D, F]` |
| `model.layers.i.mlp.up_proj.weight` `[F, D]` | `layers.i.mlp.up` `[D, F]` |
| `model.layers.i.mlp.down_proj.weight` `[D, F]` | `layers.i.mlp.down` `[F, D]` |
| `model.layers.i.mlp.act_fn.alpha_p`, `alpha_n` `(1,)` (pre-softplus, Apertus) | `layers.i.mlp.act.a_p`, `a_n` `(1,)` |
| `model.layers.i.mlp.act_fn.beta`, `eps` `()` (constants 0.5, -1e-6, Apertus) | (constants of `layers.xielu`) |
| `model.norm.weight` `[D]` | `final_norm.weight` `[D]` |
| `lm_head.weight` `[V, D]` (absent or equal to the embedding when tied) | `lm_head` `[D, V]` |

Both use the half-split ("rotate_half") RoPE layout of our `attention.apply_rope`, so q/k need no permutation.
Other configurations (SwiGLU with QK-norm, xIELU without QK-norm) have no transformers class and raise a
ValueError naming the field.
"""

import contextlib
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from safetensors import SafetensorError, safe_open
from safetensors.flax import load_file
from safetensors.numpy import save_file

from apertus_jax import files
from apertus_jax.models.config import ModelConfig
from apertus_jax.models.layers import XIELU_BETA, XIELU_EPS
from apertus_jax.models.transformer import Apertus, abstract_model, export_weights, import_weights
from apertus_jax.tokenizers import load_tokenizer

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
_LAYER_PREFIX = "model.layers."

# (ours, HF) names inside one layer; values are transposed/reshaped by `_to_ours` / `_to_hf`.
_ATTN_NAMES = (
    ("attn.q_proj", "self_attn.q_proj.weight"),
    ("attn.k_proj", "self_attn.k_proj.weight"),
    ("attn.v_proj", "self_attn.v_proj.weight"),
    ("attn.o_proj", "self_attn.o_proj.weight"),
)
_LAYER_NAMES = _ATTN_NAMES + (
    ("attn.q_norm.weight", "self_attn.q_norm.weight"),
    ("attn.k_norm.weight", "self_attn.k_norm.weight"),
    ("attn_norm.weight", "attention_layernorm.weight"),
    ("mlp_norm.weight", "feedforward_layernorm.weight"),
    ("mlp.up", "mlp.up_proj.weight"),
    ("mlp.down", "mlp.down_proj.weight"),
    ("mlp.act.a_p", "mlp.act_fn.alpha_p"),
    ("mlp.act.a_n", "mlp.act_fn.alpha_n"),
)
_LLAMA_LAYER_NAMES = _ATTN_NAMES + (
    ("attn_norm.weight", "input_layernorm.weight"),
    ("mlp_norm.weight", "post_attention_layernorm.weight"),
    ("mlp.gate", "mlp.gate_proj.weight"),
    ("mlp.up", "mlp.up_proj.weight"),
    ("mlp.down", "mlp.down_proj.weight"),
)
_XIELU_CONSTANTS = (("mlp.act_fn.beta", XIELU_BETA), ("mlp.act_fn.eps", XIELU_EPS))
# model_type -> (hidden_act, our mlp_type, our qk_norm, transformers' rms_norm_eps default).
_ARCHITECTURES = {"apertus": ("xielu", "xielu", True, 1e-5), "llama": ("silu", "swiglu", False, 1e-6)}


# ---------------------------------------------------------------- config


def config_from_hf(hf_config: dict, **overrides) -> ModelConfig:
    """Our `ModelConfig` for a HF `ApertusConfig` or `LlamaConfig` dict (`config.json` contents).

    `model_type` "apertus" gives the xIELU + QK-norm architecture, "llama" the SwiGLU one without QK-norm.
    Reads `rope_parameters` (transformers >= 5) or the older `rope_theta` + `rope_scaling` pair; rope_type
    "default" maps to `rope_scaling="none"`, "llama3" to "llama3". `max_position_embeddings` becomes
    `max_seq_len`. `overrides` set fields that HF does not describe (dtype, scan_layers, attention_impl,
    remat_policy, ...) or replace mapped ones.

    Raises:
      ValueError: a config that `Apertus` cannot represent exactly (another model type or activation,
        attention/MLP biases, a RoPE type other than default/llama3, partial rotary embeddings).
    """
    model_type = hf_config.get("model_type", "apertus")
    if model_type not in _ARCHITECTURES:
        raise ValueError(
            f"HF config has model_type={model_type!r}; only 'apertus' (ApertusForCausalLM) and 'llama' "
            f"(LlamaForCausalLM) are supported"
        )
    hidden_act, mlp_type, qk_norm, default_eps = _ARCHITECTURES[model_type]
    if hf_config.get("hidden_act", hidden_act) != hidden_act:
        raise ValueError(
            f"HF config hidden_act={hf_config['hidden_act']!r}; model_type {model_type!r} needs "
            f"{hidden_act!r} ({'ungated' if mlp_type == 'xielu' else 'gated SwiGLU'} MLP)"
        )
    for flag in ("attention_bias", "mlp_bias"):
        if hf_config.get(flag, False):
            raise ValueError(f"HF config sets {flag}=true; our Apertus has no biases (set it to false)")
    rope = _rope_parameters(hf_config)
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type not in ("default", "llama3"):
        raise ValueError(f"HF rope_type={rope_type!r} is not supported; use 'default' or 'llama3'")
    if float(rope.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ValueError("HF partial_rotary_factor != 1 is not supported (RoPE rotates the whole head_dim)")
    n_heads = int(hf_config["num_attention_heads"])
    fields = dict(
        vocab_size=int(hf_config["vocab_size"]),
        d_model=int(hf_config["hidden_size"]),
        n_layers=int(hf_config["num_hidden_layers"]),
        n_heads=n_heads,
        n_kv_heads=int(hf_config.get("num_key_value_heads") or n_heads),
        head_dim=int(hf_config.get("head_dim") or int(hf_config["hidden_size"]) // n_heads),
        mlp_hidden=int(hf_config["intermediate_size"]),
        mlp_type=mlp_type,
        qk_norm=qk_norm,
        tie_embeddings=bool(hf_config.get("tie_word_embeddings", False)),
        rope_theta=float(rope["rope_theta"]),
        rope_scaling="llama3" if rope_type == "llama3" else "none",
        rms_norm_eps=float(hf_config.get("rms_norm_eps", default_eps)),
        max_seq_len=int(hf_config.get("max_position_embeddings", ModelConfig.max_seq_len)),
    )
    if rope_type == "llama3":
        fields.update(
            rope_factor=float(rope["factor"]),
            rope_low_freq_factor=float(rope["low_freq_factor"]),
            rope_high_freq_factor=float(rope["high_freq_factor"]),
            rope_original_max_position_embeddings=int(rope["original_max_position_embeddings"]),
        )
    return ModelConfig(**{**fields, **overrides})


def _rope_parameters(hf_config: dict) -> dict:
    """The RoPE dict with `rope_theta` inside, from either HF config generation."""
    if hf_config.get("rope_parameters"):
        rope = dict(hf_config["rope_parameters"])
    else:
        rope = dict(hf_config.get("rope_scaling") or {"rope_type": "default"})
        if "rope_theta" in hf_config:
            rope["rope_theta"] = hf_config["rope_theta"]
    if "rope_theta" not in rope:
        raise ValueError("HF config has no rope_theta (neither in rope_parameters nor at the top level)")
    return rope


def hf_model_type(config: ModelConfig) -> str:
    """The HF `model_type` that represents `config` exactly: "apertus" (xIELU MLP with QK-norm) or "llama"
    (SwiGLU MLP without QK-norm).

    Raises:
      ValueError: any other combination of `mlp_type` and `qk_norm` (no transformers class has it).
    """
    if config.mlp_type == "xielu":
        if not config.qk_norm:
            raise ValueError(
                "qk_norm=False has no ApertusForCausalLM equivalent (Apertus always applies QK-norm)"
            )
        return "apertus"
    if config.qk_norm:
        raise ValueError(
            "mlp_type='swiglu' with qk_norm=True has no LlamaForCausalLM equivalent (Llama has no QK-norm)"
        )
    return "llama"


def hf_max_positions(config: ModelConfig) -> int:
    """`max_position_embeddings` of the HF config of `config`: `max_seq_len`, except under llama3 RoPE scaling
    with `max_seq_len <= rope_original_max_position_embeddings`, where it is `rope_factor` times the original
    length: the context the scaled frequencies are made for (Apertus pretraining: 4,096-token rows, original
    8,192, factor 8 -> 65,536; docs/recipe.md section 1). transformers warns on every load of a llama3 config
    whose original length is not below `max_position_embeddings`. `max_seq_len` does not enter the forward
    pass (`ModelConfig`), so the logits are the same; `config_from_hf` reads the value back as `max_seq_len`.
    """
    original = config.rope_original_max_position_embeddings
    if config.rope_scaling == "llama3" and config.max_seq_len <= original:
        return int(config.rope_factor * original)
    return config.max_seq_len


def config_to_hf(config: ModelConfig, bos_id: int = 1, eos_id: int | list[int] = 2, pad_id: int = 3) -> dict:
    """A `config.json` dict for `transformers.ApertusForCausalLM` or `LlamaForCausalLM` equivalent to `config`.

    The class follows `hf_model_type(config)`; `max_position_embeddings` is `hf_max_positions(config)`.
    `bos_id`, `eos_id` (one id or a list), `pad_id`: the tokenizer's special ids (default: the tekken layout
    BoD 1, EoD 2, pad 3 that the trained SentencePiece models share).

    Raises:
      ValueError: as `hf_model_type`.
    """
    model_type = hf_model_type(config)
    rope = {"rope_type": "default", "rope_theta": float(config.rope_theta)}
    if config.rope_scaling == "llama3":
        rope.update(
            rope_type="llama3",
            factor=float(config.rope_factor),
            original_max_position_embeddings=int(config.rope_original_max_position_embeddings),
            low_freq_factor=float(config.rope_low_freq_factor),
            high_freq_factor=float(config.rope_high_freq_factor),
        )
    hf_config = {
        "architectures": ["ApertusForCausalLM"],
        "model_type": "apertus",
        "vocab_size": config.vocab_size,
        "hidden_size": config.d_model,
        "intermediate_size": config.mlp_hidden,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "num_key_value_heads": config.n_kv_heads,
        "head_dim": config.head_dim,
        "hidden_act": "xielu",
        "max_position_embeddings": hf_max_positions(config),
        "rms_norm_eps": config.rms_norm_eps,
        "rope_parameters": rope,
        "tie_word_embeddings": config.tie_embeddings,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "pad_token_id": pad_id,
        "dtype": "float32",
    }
    if model_type == "llama":
        hf_config.update(
            architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu", mlp_bias=False
        )
    return hf_config


# ---------------------------------------------------------------- weights


def _to_ours(name: str, w: np.ndarray, config: ModelConfig) -> np.ndarray:
    """One HF layer tensor (layer-relative `name`, ours) into our layout."""
    d, n, k, h = config.d_model, config.n_heads, config.n_kv_heads, config.head_dim
    if name == "attn.q_proj":
        return w.T.reshape(d, n, h)
    if name in ("attn.k_proj", "attn.v_proj"):
        return w.T.reshape(d, k, h)
    if name == "attn.o_proj":
        return w.T.reshape(n, h, d)
    if name in ("mlp.up", "mlp.gate", "mlp.down"):
        return w.T
    return w


def _to_hf(name: str, w: np.ndarray) -> np.ndarray:
    """One of our layer arrays (layer-relative `name`) into the HF `[out, in]` layout."""
    if name in ("attn.q_proj", "attn.k_proj", "attn.v_proj"):
        return w.reshape(w.shape[0], -1).T
    if name == "attn.o_proj":
        return w.reshape(-1, w.shape[-1]).T
    if name in ("mlp.up", "mlp.gate", "mlp.down"):
        return w.T
    return w


def from_hf(state_dict: dict[str, np.ndarray], config: dict, **overrides) -> Apertus:
    """An `Apertus` model holding the weights of a HF `ApertusForCausalLM` or `LlamaForCausalLM` state dict.

    Args:
      state_dict: HF tensor name -> array (any float dtype; stored as float32). `lm_head.weight` may be
        absent when `tie_word_embeddings` (it must then equal the embedding if present).
      config: the HF config dict (`config.json` contents); its `model_type` picks the tensor names.
      **overrides: `ModelConfig` fields HF does not describe (e.g. `scan_layers=True`, `dtype="bfloat16"`).
    Returns:
      The model (scanned or unscanned per `overrides`), parameters float32.
    Raises:
      ValueError: unsupported config (see `config_from_hf`), missing/unexpected tensors, wrong shapes, or
        xIELU constants beta/eps other than 0.5/-1e-6.
    """
    cfg = config_from_hf(config, **overrides)
    layer_names = _layer_names(cfg)
    remaining = {name: np.asarray(w, dtype=np.float32) for name, w in state_dict.items()}
    missing = []

    def take(hf_name: str) -> np.ndarray | None:
        if hf_name not in remaining:
            missing.append(hf_name)
        return remaining.pop(hf_name, None)

    weights = {"embed": take("model.embed_tokens.weight"), "final_norm.weight": take("model.norm.weight")}
    if not cfg.tie_embeddings:
        lm_head = take("lm_head.weight")
        weights["lm_head"] = None if lm_head is None else lm_head.T
    elif "lm_head.weight" in remaining:
        lm_head = remaining.pop("lm_head.weight")
        if weights["embed"] is not None and not np.array_equal(lm_head, weights["embed"]):
            raise ValueError(
                "tie_word_embeddings=true but lm_head.weight differs from model.embed_tokens.weight"
            )
    if cfg.mlp_type == "swiglu":
        # Llama checkpoints of older transformers versions saved the RoPE frequencies; ours are computed.
        for name in [n for n in remaining if n.endswith(".self_attn.rotary_emb.inv_freq")]:
            remaining.pop(name)
    for i in range(cfg.n_layers):
        prefix = f"{_LAYER_PREFIX}{i}."
        for ours, theirs in layer_names:
            w = take(prefix + theirs)
            weights[f"layers.{i}.{ours}"] = None if w is None else _to_ours(ours, w, cfg)
        for theirs, value in _XIELU_CONSTANTS if cfg.mlp_type == "xielu" else ():
            w = remaining.pop(prefix + theirs, None)
            if w is not None and not np.allclose(w, value, rtol=0, atol=1e-7 + 1e-3 * abs(value)):
                raise ValueError(f"{prefix + theirs} = {w.item()}, but our xIELU fixes it at {value}")
    if missing or remaining:
        raise ValueError(
            f"from_hf: missing HF tensors {missing[:5]}, unexpected HF tensors {sorted(remaining)[:5]} "
            f"(is the config right for this checkpoint?)"
        )
    model = _zeros_model(cfg)
    import_weights(model, weights)
    nnx.update(model, jax.tree.map(jnp.asarray, nnx.state(model)))
    return model


def _layer_names(config: ModelConfig) -> tuple[tuple[str, str], ...]:
    """(ours, HF) tensor names inside one layer for the architecture of `config`."""
    return _LLAMA_LAYER_NAMES if config.mlp_type == "swiglu" else _LAYER_NAMES


def _zeros_model(config: ModelConfig) -> Apertus:
    """An `Apertus` with host (numpy) zero parameters: no random init, which costs seconds to minutes."""
    graphdef, abstract = abstract_model(config)
    return nnx.merge(graphdef, jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), abstract))


def to_hf(model: Apertus, **special_ids) -> tuple[dict[str, np.ndarray], dict]:
    """The HF state dict (float32 numpy, `[out, in]` linears) and config dict of `model`: an
    `ApertusForCausalLM` one for the Apertus architecture, a `LlamaForCausalLM` one for SwiGLU without QK-norm.

    Writes the xIELU constants `beta`/`eps` of Apertus too (they are persistent buffers in transformers). A
    tied model has no `lm_head.weight` entry (transformers re-ties it from the embedding). `special_ids`:
    `bos_id`, `eos_id`, `pad_id` as in `config_to_hf`.

    Raises:
      ValueError: `model.config` has no transformers equivalent (see `hf_model_type`).
    """
    cfg = model.config
    hf_config = config_to_hf(cfg, **special_ids)
    weights = {name: np.asarray(w, dtype=np.float32) for name, w in export_weights(model).items()}
    state_dict = {
        "model.embed_tokens.weight": weights["embed"],
        "model.norm.weight": weights["final_norm.weight"],
    }
    if not cfg.tie_embeddings:
        state_dict["lm_head.weight"] = weights["lm_head"].T
    for i in range(cfg.n_layers):
        prefix = f"{_LAYER_PREFIX}{i}."
        for ours, theirs in _layer_names(cfg):
            state_dict[prefix + theirs] = _to_hf(ours, weights[f"layers.{i}.{ours}"])
        for theirs, value in _XIELU_CONSTANTS if cfg.mlp_type == "xielu" else ():
            state_dict[prefix + theirs] = np.asarray(value, dtype=np.float32)
    return {name: np.asarray(w, order="C") for name, w in state_dict.items()}, hf_config


# ---------------------------------------------------------------- files


def save_hf(model: Apertus, directory: str | os.PathLike, **special_ids) -> None:
    """Write `config.json` and `model.safetensors` for `transformers.AutoModelForCausalLM.from_pretrained`
    (`ApertusForCausalLM` or `LlamaForCausalLM`, see `to_hf`; `special_ids` as there).

    Each file is written atomically (`apertus_jax.files`), so an interrupted save never leaves a half-written
    file under its final name.

    Raises:
      ValueError: as `to_hf`.
    """
    state_dict, hf_config = to_hf(model, **special_ids)
    with files.atomic_path(os.path.join(directory, WEIGHTS_FILE)) as tmp:
        save_file(state_dict, tmp, metadata={"format": "pt"})
    files.write_json(os.path.join(directory, CONFIG_FILE), hf_config, indent=2, sort_keys=True)


def load_hf(directory: str | os.PathLike, **overrides) -> Apertus:
    """Load an `Apertus` model from a HF checkpoint directory (`config.json` + `model.safetensors`).

    Sharded checkpoints (`model-0000i-of-0000n.safetensors` with an index) are read through the index.
    `overrides` as in `from_hf`. Reads safetensors only, never pickles (through the flax loader, because
    numpy has no bfloat16 and the released checkpoints are bfloat16).

    Raises:
      FileNotFoundError: `config.json` or the safetensors weights are missing.
      ValueError: a weights file that is not whole (`check_weight_files`), or as `from_hf`.
    """
    config_path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(config_path):
        raise FileNotFoundError(
            f"{config_path} not found: pass a HF checkpoint directory (config.json + model.safetensors)"
        )
    with open(config_path) as f:
        hf_config = json.load(f)
    state_dict = {}
    for path in check_weight_files(directory):
        state_dict.update(load_file(path))
    return from_hf(state_dict, hf_config, **overrides)


def _weight_files(directory: str | os.PathLike) -> list[str]:
    """Paths of the safetensors files of a checkpoint: the single file, or the shards named by the index."""
    single = os.path.join(directory, WEIGHTS_FILE)
    if os.path.isfile(single):
        return [single]
    index = os.path.join(directory, WEIGHTS_FILE + ".index.json")
    if os.path.isfile(index):
        with open(index) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        return [os.path.join(directory, shard) for shard in shards]
    raise FileNotFoundError(
        f"no {WEIGHTS_FILE} (or {WEIGHTS_FILE}.index.json) in {directory}; only safetensors "
        f"checkpoints are read"
    )


def check_weight_files(directory: str | os.PathLike, where: str = "") -> list[str]:
    """The paths of the checkpoint's safetensors files (`_weight_files`), each checked to be whole.

    Reads each file's header only, so a truncated or damaged file is refused before anything is loaded.

    Args:
      where: what the caller was given (`checkpoint.init_from=hf:DIR`), put before the message; "" for none.
    Raises:
      FileNotFoundError: no safetensors weights in `directory`.
      ValueError: one line naming a file that is not whole (its header does not cover it) and the fix.
    """
    paths = _weight_files(directory)
    for path in paths:
        try:
            with safe_open(path, framework="numpy"):
                pass
        except SafetensorError as error:
            prefix = f"{where}: " if where else ""
            raise ValueError(
                f"{prefix}{path} is not a whole safetensors file ({error}); copy or export it again"
            ) from None
    return paths


# ---------------------------------------------------------------- continued pretraining (`init_from = "hf:DIR"`)

# The fields that fix the parameters' names, shapes and meaning: a checkpoint initializes a run only if its
# config gives the run's values. RoPE settings and the sequence length may differ (a context extension
# changes them on purpose).
PARAM_FIELDS = (
    "vocab_size",
    "d_model",
    "n_layers",
    "n_heads",
    "n_kv_heads",
    "head_dim",
    "mlp_hidden",
    "mlp_type",
    "qk_norm",
    "tie_embeddings",
    "rms_norm_eps",
)
TOKENIZER_FILE = "tokenizer.json"
# Article 1 of the Universal Declaration of Human Rights in five scripts: two tokenizers that encode it alike,
# with the same vocabulary size and special ids, are taken to be the same.
TOKENIZER_PROBE = (
    "All human beings are born free and equal in dignity and rights.\n"
    "Alle Menschen sind frei und gleich an Würde und Rechten geboren.\n"
    "Tous les êtres humains naissent libres et égaux en dignité et en droits.\n"
    "Все люди рождаются свободными и равными в своем достоинстве и правах.\n"
    "人人生而自由，在尊严和权利上一律平等。 1948-12-10"
)


def check_init_dir(directory: str, config: ModelConfig, tokenizer) -> None:
    """Checks that the HF checkpoint in `directory` can initialize a run of `config` that reads `tokenizer`.

    The checkpoint's `config.json` must give the run's `PARAM_FIELDS`, and its `tokenizer.json` the run's
    tokenizer (same vocabulary size, BoD/EoD/padding ids and ids of `TOKENIZER_PROBE`).

    Raises:
      FileNotFoundError: no `config.json`, safetensors weights or `tokenizer.json` in `directory`.
      ValueError: a weights file that is not whole (truncated: its header does not cover it), or one line
        naming the first field or tokenizer property that differs, and the fix.
    """
    where = f"checkpoint.init_from=hf:{directory}"
    for name in (CONFIG_FILE, TOKENIZER_FILE):
        if not os.path.isfile(os.path.join(directory, name)):
            raise FileNotFoundError(f"{where}: no {name}; point it at a HF checkpoint directory")
    check_weight_files(directory, where)  # before the run writes anything
    with open(os.path.join(directory, CONFIG_FILE)) as f:
        theirs = config_from_hf(json.load(f))
    for field in PARAM_FIELDS:
        if getattr(theirs, field) != getattr(config, field):
            raise ValueError(
                f"{where}: its config.json gives {field}={getattr(theirs, field)!r}, the run has "
                f"model.{field}={getattr(config, field)!r}; set --config.model.{field}={getattr(theirs, field)!r}"
            )
    hf_tokenizer = load_tokenizer(f"hf:{os.path.join(directory, TOKENIZER_FILE)}")
    for prop in ("vocab_size", "bod_id", "eod_id", "pad_id"):
        if getattr(hf_tokenizer, prop) != getattr(tokenizer, prop):
            raise ValueError(
                f"{where}: its tokenizer.json has {prop}={getattr(hf_tokenizer, prop)}, the run's tokenizer "
                f"{tokenizer.name} {getattr(tokenizer, prop)}; set --config.data.tokenizer to the checkpoint's"
            )
    if hf_tokenizer.encode(TOKENIZER_PROBE) != tokenizer.encode(TOKENIZER_PROBE):
        raise ValueError(
            f"{where}: its tokenizer.json encodes text otherwise than the run's tokenizer {tokenizer.name}; set "
            f"--config.data.tokenizer to the checkpoint's"
        )


def read_params(directory: str, config: ModelConfig, abstract_params: dict) -> dict:
    """The parameters of the HF checkpoint in `directory`, as arrays placed like `abstract_params`.

    Every device's shard is read on its own from the memory-mapped safetensors files
    (`safe_open(...).get_slice`) and put on its device before the next is read: a process reads only the
    slices of its own devices, and its host memory holds, besides what its devices hold, one slice at a time
    (tests/trained/test_export.py measures it). Values are cast to each parameter's dtype (float32 from
    bfloat16 is exact). Call `check_init_dir` first.

    Args:
      config: the run's model (scanned layers get a leading layer axis).
      abstract_params: the train state's parameters as `jax.ShapeDtypeStruct`s with shardings
        (`apertus_jax.train.train_state.AbstractParams.abstract`).

    Raises:
      ValueError: the checkpoint lacks a tensor the model needs, or holds xIELU constants other than ours.
    """
    hf_names = dict(_layer_names(config))
    with contextlib.ExitStack() as stack:
        opened = {
            path: stack.enter_context(safe_open(path, framework="numpy")) for path in _weight_files(directory)
        }
        files_of = {name: path for path, f in opened.items() for name in f.keys()}

        def tensor(name: str):
            if name not in files_of:
                raise ValueError(f"hf:{directory} has no tensor {name} (is it a checkpoint of this model?)")
            return opened[files_of[name]].get_slice(name)

        for i in range(config.n_layers if config.mlp_type == "xielu" else 0):
            for name, value in _XIELU_CONSTANTS:
                full = f"{_LAYER_PREFIX}{i}.{name}"
                stored = (
                    np.asarray(opened[files_of[full]].get_tensor(full), np.float32)
                    if full in files_of
                    else value
                )
                if not np.allclose(stored, value, rtol=0, atol=1e-7 + 1e-3 * abs(value)):
                    raise ValueError(f"{full} = {stored}, but our xIELU fixes it at {value}")

        def read(keys: list[str], index: tuple[slice, ...], shape: tuple[int, ...]) -> np.ndarray:
            index = tuple(slice(*s.indices(n)) for s, n in zip(index, shape, strict=True))
            if keys[0] != "layers":
                hf_name = {"embed": "model.embed_tokens.weight", "lm_head": "lm_head.weight"}.get(
                    keys[0], "model.norm.weight"
                )
                return _read_box(
                    tensor(hf_name), "mlp.up" if keys[0] == "lm_head" else keys[0], index, config
                )
            if config.scan_layers:
                layers, index, name = range(*index[0].indices(shape[0])), index[1:], ".".join(keys[1:])
            else:
                layers, name = [int(keys[1])], ".".join(keys[2:])
            blocks = [
                _read_box(tensor(f"{_LAYER_PREFIX}{i}.{hf_names[name]}"), name, index, config) for i in layers
            ]
            return np.stack(blocks) if config.scan_layers else blocks[0]

        def load(path, leaf: jax.ShapeDtypeStruct) -> jax.Array:
            # One device's slice at a time, each put on its device before the next is read: the host holds
            # the parameters read so far and one slice (`make_array_from_callback` holds every slice of the
            # array until all are read).
            keys = [str(getattr(entry, "key", getattr(entry, "idx", entry))) for entry in path]
            devices = leaf.sharding.addressable_devices_indices_map(leaf.shape)
            shards = [
                jax.device_put(read(keys, index, leaf.shape).astype(leaf.dtype), device)
                for device, index in devices.items()
            ]
            return jax.make_array_from_single_device_arrays(leaf.shape, leaf.sharding, shards)

        return jax.tree_util.tree_map_with_path(load, abstract_params)


def _read_box(hf_slice, name: str, index: tuple[slice, ...], config: ModelConfig) -> np.ndarray:
    """Our `name` (layer-relative, or embed / final_norm / lm_head) at `index` (our layout, concrete slices),
    read from the HF tensor `hf_slice` as the smallest box of whole heads in its `[out, in]` layout."""
    h = config.head_dim
    if name in ("attn.q_proj", "attn.k_proj", "attn.v_proj"):  # ours [D, heads, H] = HF [heads * H, D].T
        d, heads, dims = index
        box = hf_slice[heads.start * h : heads.stop * h, d]
        ours = np.asarray(box, np.float32).T.reshape(d.stop - d.start, heads.stop - heads.start, h)
        return ours[:, :, dims]
    if name == "attn.o_proj":  # ours [N, H, D] = HF [D, N * H].T
        heads, dims, d = index
        box = hf_slice[d, heads.start * h : heads.stop * h]
        return np.asarray(box, np.float32).T.reshape(heads.stop - heads.start, h, d.stop - d.start)[
            :, dims, :
        ]
    if name in ("mlp.up", "mlp.gate", "mlp.down"):  # ours [in, out] = HF [out, in].T (lm_head alike)
        return np.asarray(hf_slice[index[1], index[0]], np.float32).T
    return np.asarray(hf_slice[index], np.float32)
