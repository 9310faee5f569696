"""The Apertus pretraining recipe shared by `apertus_8b.py` and `apertus_70b.py` (docs/recipe.md 1, 4-6)."""

import dataclasses

import ml_collections

from apertus_jax.config.schema import base_config
from apertus_jax.models.presets import model_section
from apertus_jax.optim.config import OptimConfig
from apertus_jax.optim.presets import get_optim_preset

APERTUS_COMPONENTS = (
    "fineweb_edu",
    "fineweb_edu_3",
    "fineweb_hq",
    "fineweb2_hq",
    "starcoder",
    "finemath",
    "megamath_web",
    "dclm_edu",
    "stack_v2_edu",
    "wikipedia",
    "parallel",
    "instruct",
)


def apply_optim_preset(config: ml_collections.ConfigDict, name: str) -> None:
    """Copies every `OptimConfig` field of optimizer preset `name` ("apertus-8b" | "apertus-70b") into
    `config.optim` and its (snapped) batch-size plan into `config.train.batch_plan`; `train.steps` becomes
    the preset's token budget in steps."""
    preset = get_optim_preset(name)
    for field in dataclasses.fields(OptimConfig):
        config.optim[field.name] = getattr(preset, field.name)
    config.train.batch_plan = preset.batch_plan.phases
    config.train.steps = preset.total_steps()


def apertus_recipe(
    preset: str, stage_bounds: tuple[float, ...], tensor: int, every_steps: int
) -> ml_collections.ConfigDict:
    """The Apertus pretraining recipe for model preset `preset` ("apertus-8b" | "apertus-70b"), unlocked.

    bf16 compute, scanned layers with full remat, cuDNN attention, tekken at 4,096 tokens, the five
    curriculum stages ending at `stage_bounds` (tokens), the optimizer preset of the same name (AdEMAMix,
    WSD 1-sqrt, batch doubling; docs/recipe.md 4-6), mesh fsdp=-1 x `tensor`. Gradient accumulation over
    256-row microbatches: one 4,096-token row per batch-sharded device on 256 such devices; set
    `train.microbatch_size` to your data x fsdp device count x rows per device (`experiments.memory_plan`).
    """
    config = base_config()
    config.model = model_section(
        preset, dtype="bfloat16", scan_layers=True, remat_policy="full", attention_impl="cudnn"
    )
    config.data.tokenizer = "tekken"
    config.data.seq_len = 4096
    config.data.pipeline = apertus_stages(stage_bounds=stage_bounds)
    apply_optim_preset(config, preset)
    config.train.microbatch_size = 256
    config.mesh.data, config.mesh.fsdp, config.mesh.tensor = 1, -1, tensor
    config.checkpoint.every_steps = every_steps
    return config


def apertus_stages(stage_bounds: tuple[float, float, float, float], root: str = "/data/apertus") -> dict:
    """The 5-stage Apertus curriculum (docs/recipe.md 6) as a `data.pipeline` dict over ArrayRecord shard sets
    `root/<component>`, each stage with its own seed, Goldfish with the Apertus settings (the default). The
    stage composition follows docs/recipe.md 6; the exact shares within a stage are illustrative (English
    ~57%, multilingual 33% then 10%, code/math the rest).

    Args:
      stage_bounds: token counts where stages 2, 3, 4 and 5 start (8B: 7T, 9T, 12T, 13.5T).
    """
    stages = [
        {"fineweb_edu": 0.57, "fineweb2_hq": 0.33, "starcoder": 0.07, "finemath": 0.03},
        {
            "fineweb_edu_3": 0.285,
            "fineweb_hq": 0.285,
            "fineweb2_hq": 0.33,
            "starcoder": 0.07,
            "finemath": 0.03,
        },
        {
            "fineweb_edu_3": 0.285,
            "fineweb_hq": 0.285,
            "fineweb2_hq": 0.33,
            "starcoder": 0.06,
            "finemath": 0.02,
            "megamath_web": 0.02,
        },
        {"dclm_edu": 0.8, "fineweb2_hq": 0.1, "megamath_web": 0.05, "starcoder": 0.05},
        {
            "dclm_edu": 0.6,
            "fineweb2_hq": 0.1,
            "stack_v2_edu": 0.08,
            "starcoder": 0.05,
            "wikipedia": 0.07,
            "parallel": 0.03,
            "instruct": 0.07,
        },
    ]
    bounds = [int(b) for b in stage_bounds] + [None]
    return dict(
        components={name: dict(kind="arrayrecord", paths=[f"{root}/{name}"]) for name in APERTUS_COMPONENTS},
        stages=[
            dict(name=f"stage{i + 1}", until_tokens=bound, weights=weights, seed=i + 1)
            for i, (weights, bound) in enumerate(zip(stages, bounds))
        ],
        split_seed=0,
    )
