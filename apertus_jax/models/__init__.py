"""Apertus / Llama-style decoder models in Flax NNX: config, presets, forward, partitioning, FLOPs."""

from apertus_jax.models.config import ModelConfig
from apertus_jax.models.presets import PRESET_NAMES, get_config
from apertus_jax.models.transformer import (
    Apertus,
    create_model,
    export_weights,
    import_weights,
    model_from_params,
)

__all__ = [
    "Apertus",
    "ModelConfig",
    "PRESET_NAMES",
    "create_model",
    "export_weights",
    "get_config",
    "import_weights",
    "model_from_params",
]
