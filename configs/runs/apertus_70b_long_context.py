"""Apertus-70B context extension (docs/recipe.md section 5; Apertus report section 2.5): 8k / 16k / 32k / 64k
tokens with RoPE theta 1M / 2M / 4M / 8M (the report gives 8M as the 70B's final theta; the earlier stages
follow the 8B), ~8.4M tokens per batch, the LR warmed up again over 1.2B tokens per stage then held at 1e-6;
tensor parallelism 4 as in pretraining, context parallelism growing to 8-way at 64k. Sized for 256 devices.

    python -m experiments.long_context --config=configs/runs/apertus_70b_long_context.py \\
        --init_from=PRETRAIN_WORKDIR --workdir=LONG_CONTEXT_ROOT
"""

from configs.recipes.long_context import apertus_stages, long_context_stage

BATCH_TOKENS = 2048 * 4096  # 8,388,608 tokens per batch, as the 8B (docs/recipe.md section 5)
DEVICES = 256
STAGES = apertus_stages(final_rope_theta=8e6, contexts=(1, 2, 4, 8))


def get_config(stage: str = "8k"):
    return extension_stage(STAGES, stage)


def extension_stage(stages, name: str):
    """Stage `name` of `stages` with this model's batch, learning rate and layout (also the 262k stages of
    `apertus_70b_262k.py`)."""
    return long_context_stage(
        "apertus-70b",
        stages,
        name,
        batch_tokens=BATCH_TOKENS,
        peak_lr=1e-6,
        tensor=4,
        devices=DEVICES,
        every_steps=250,
    )
