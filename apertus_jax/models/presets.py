"""Named model presets (docs/recipe.md section 1 sizes; Llama-3.2-like shapes for the ablation sizes).

| preset | layers | d_model | MLP | heads / kv | head_dim | vocab | notes |
| --- | --- | --- | --- | --- | --- | --- | --- |
| apertus-8b | 32 | 4096 | 21504 xIELU | 32 / 8 | 128 | 131072 | ~8.05B params |
| apertus-70b | 80 | 8192 | 43008 xIELU | 64 / 8 | 128 | 131072 | ~70.6B params |
| apertus-3b | 28 | 3072 | 12288 xIELU | 24 / 8 | 128 | 131072 | Llama-3.2-3B shape, MLP 1.5 x 8192 |
| apertus-1.5b | 16 | 2048 | 12288 xIELU | 32 / 8 | 64 | 131072 | Llama-3.2-1B shape, MLP 1.5 x 8192 |
| apertus-mini-0.5b | 32 | 1024 | 4096 xIELU | 16 / 4 | 64 | 131072 | distillation student, tied, ~0.49B params |
| apertus-mini-1.5b | 52 | 1536 | 6144 xIELU | 12 / 4 | 128 | 131072 | student, tied, ~1.51B (apertus-1.5b's count) |
| apertus-mini-4b | 54 | 2560 | 10240 xIELU | 20 / 4 | 128 | 131072 | student, tied, ~4.02B params |
| boldt-1b | 16 | 2048 | 8192 SwiGLU | 32 / 8 | 64 | 32000 | Llama-style, ~0.97B non-embedding |
| boldt-350m | 28 | 1024 | 2816 SwiGLU | 16 / 16 | 64 | 32000 | Llama-style, ~0.36B non-embedding |
| tiny | 2 | 128 | 384 xIELU | 4 / 2 | 32 | 131072 | CPU tests (override vocab_size) |
| tiny-llama | 2 | 128 | 256 SwiGLU | 4 / 2 | 32 | 32000 | CPU tests |
| bench-18m-apertus | 2 | 256 | 1536 xIELU | 4 / 4 | 64 | 32000 | benchmark vs MaxText / transformers |
| bench-18m-llama | 2 | 256 | 1024 SwiGLU | 4 / 4 | 64 | 32000 | same, Llama-2 block |

The Apertus ablation sizes (1.5B, 3B) are not tabulated in the report; the shapes above are the Llama-3.2
1B/3B shapes with the ungated MLP widened 1.5x, as the report does for xIELU. The Boldt paper gives only
"Llama architecture, 350M non-embedding / 1B parameters, 32k BPE vocabulary"; its shapes are our choice.
The Apertus Mini students (docs/recipe.md section 13) are known only as 0.5B, 1.5B and 4B, tied embeddings,
deeper and thinner than a from-scratch model of their size; the shapes above are our choice to that description
(the 1.5B student has 52 layers of width 1536 where apertus-1.5b has 16 of 2048, at the same count).
Llama-style presets use QK-norm off, RoPE theta 10,000 without scaling and untied embeddings.
"""

import dataclasses

from apertus_jax.models.config import ModelConfig

_LLAMA_STYLE = dict(mlp_type="swiglu", qk_norm=False, rope_theta=10_000.0, rope_scaling="none")

_PRESETS: dict[str, dict] = {
    "apertus-8b": dict(
        vocab_size=131072,
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        head_dim=128,
        mlp_hidden=21504,
        max_seq_len=4096,
    ),
    "apertus-70b": dict(
        vocab_size=131072,
        d_model=8192,
        n_layers=80,
        n_heads=64,
        n_kv_heads=8,
        head_dim=128,
        mlp_hidden=43008,
        max_seq_len=4096,
    ),
    "apertus-3b": dict(
        vocab_size=131072,
        d_model=3072,
        n_layers=28,
        n_heads=24,
        n_kv_heads=8,
        head_dim=128,
        mlp_hidden=12288,
        max_seq_len=4096,
    ),
    "apertus-1.5b": dict(
        vocab_size=131072,
        d_model=2048,
        n_layers=16,
        n_heads=32,
        n_kv_heads=8,
        head_dim=64,
        mlp_hidden=12288,
        max_seq_len=4096,
    ),
    "apertus-mini-0.5b": dict(
        vocab_size=131072,
        d_model=1024,
        n_layers=32,
        n_heads=16,
        n_kv_heads=4,
        head_dim=64,
        mlp_hidden=4096,
        max_seq_len=4096,
        tie_embeddings=True,
    ),
    "apertus-mini-1.5b": dict(
        vocab_size=131072,
        d_model=1536,
        n_layers=52,
        n_heads=12,
        n_kv_heads=4,
        head_dim=128,
        mlp_hidden=6144,
        max_seq_len=4096,
        tie_embeddings=True,
    ),
    "apertus-mini-4b": dict(
        vocab_size=131072,
        d_model=2560,
        n_layers=54,
        n_heads=20,
        n_kv_heads=4,
        head_dim=128,
        mlp_hidden=10240,
        max_seq_len=4096,
        tie_embeddings=True,
    ),
    "boldt-1b": dict(
        vocab_size=32000,
        d_model=2048,
        n_layers=16,
        n_heads=32,
        n_kv_heads=8,
        head_dim=64,
        mlp_hidden=8192,
        max_seq_len=2048,
        **_LLAMA_STYLE,
    ),
    "boldt-350m": dict(
        vocab_size=32000,
        d_model=1024,
        n_layers=28,
        n_heads=16,
        n_kv_heads=16,
        head_dim=64,
        mlp_hidden=2816,
        max_seq_len=2048,
        **_LLAMA_STYLE,
    ),
    "tiny": dict(
        vocab_size=131072,
        d_model=128,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        head_dim=32,
        mlp_hidden=384,
        max_seq_len=256,
    ),
    "tiny-llama": dict(
        vocab_size=32000,
        d_model=128,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        head_dim=32,
        mlp_hidden=256,
        max_seq_len=256,
        **_LLAMA_STYLE,
    ),
    "bench-18m-apertus": dict(
        vocab_size=32000,
        d_model=256,
        n_layers=2,
        n_heads=4,
        n_kv_heads=4,
        head_dim=64,
        mlp_hidden=1536,
        max_seq_len=256,
    ),
    "bench-18m-llama": dict(
        vocab_size=32000,
        d_model=256,
        n_layers=2,
        n_heads=4,
        n_kv_heads=4,
        head_dim=64,
        mlp_hidden=1024,
        max_seq_len=256,
        **_LLAMA_STYLE,
    ),
}

PRESET_NAMES = tuple(_PRESETS)


def get_config(name: str, **overrides) -> ModelConfig:
    """The `ModelConfig` of preset `name` with keyword `overrides` (e.g. `vocab_size=512, scan_layers=True`).

    Raises:
      ValueError: unknown preset name (the message lists the valid names) or an invalid override.
    """
    if name not in _PRESETS:
        raise ValueError(f"unknown model preset {name!r}; valid names: {', '.join(PRESET_NAMES)}")
    unknown = set(overrides) - {f.name for f in ModelConfig.__dataclass_fields__.values()}
    if unknown:
        raise ValueError(f"unknown ModelConfig field(s) {sorted(unknown)} for preset {name!r}")
    return ModelConfig(**{**_PRESETS[name], **overrides})


def model_section(preset: str, **overrides) -> dict:
    """The `model` section of a run config: every `ModelConfig` field of `preset` (with `overrides`), plus
    the preset name.

    Raises:
      ValueError: as `get_config`.
    """
    return {"preset": preset, **dataclasses.asdict(get_config(preset, **overrides))}


def from_section(section) -> ModelConfig:
    """The validated `ModelConfig` of a `model` section (dict or ConfigDict; the `preset` key is a label).

    Raises:
      ValueError: an unknown field or an inconsistent value (one line).
    """
    fields = {k: v for k, v in dict(section).items() if k != "preset"}
    unknown = set(fields) - {f.name for f in dataclasses.fields(ModelConfig)}
    if unknown:
        raise ValueError(f"model: unknown fields {sorted(unknown)}")
    return ModelConfig(**fields)
