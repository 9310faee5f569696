"""Apertus / Llama-style decoder models in Flax NNX (docs/recipe.md section 1).

- `config`: `ModelConfig`, one frozen dataclass for every variant;
- `presets`: the named sizes;
- `transformer`: the Apertus decoder with layer scan and remat;
- `layers`: parameters with logical axes, RMSNorm, xIELU, the MLP;
- `attention`: GQA with QK-norm, RoPE and packed-document masks;
- `fp8`: FP8 projections;
- `partitioning`: the logical-axis rule table, parameter shardings and activation constraints;
- `flops`: parameter counts and FLOPs per token;
- `generate`: KV-cached generation;
- `hf`: transformers checkpoints in and out.
"""

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
