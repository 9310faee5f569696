"""Apertus-8B context extension (docs/recipe.md section 5; Apertus report section 2.5, Table 5): 8k / 16k /
32k / 64k tokens with RoPE theta 1M / 2M / 4M / 12M, ~8.4M tokens per batch (the pretraining batch), the LR
warmed up again over 1.2B tokens per stage then held at 1.1e-5; context parallelism grows to 4-way at 64k.
Sized for 64 devices (microbatches of one row per batch-sharded device; `experiments.memory_plan`).

    python -m experiments.long_context --config=configs/runs/apertus_8b_long_context.py \\
        --init_from=PRETRAIN_WORKDIR --workdir=LONG_CONTEXT_ROOT
    python -m experiments.pretrain --config=configs/runs/apertus_8b_long_context.py:16k \\
        --config.checkpoint.init_from=LONG_CONTEXT_ROOT/8k --workdir=LONG_CONTEXT_ROOT/16k   # one stage
"""

from configs.recipes.long_context import apertus_stages, long_context_stage

BATCH_TOKENS = 2048 * 4096  # 8,388,608: the pretraining batch after its doubling
DEVICES = 64
STAGES = apertus_stages(final_rope_theta=12e6, contexts=(1, 2, 4, 4))


def get_config(stage: str = "8k"):
    return extension_stage(STAGES, stage)


def extension_stage(stages, name: str):
    """Stage `name` of `stages` with this model's batch, learning rate and layout (also the 262k stages of
    `apertus_8b_262k.py`)."""
    return long_context_stage(
        "apertus-8b",
        stages,
        name,
        batch_tokens=BATCH_TOKENS,
        peak_lr=1.1e-5,
        tensor=1,
        devices=DEVICES,
        every_steps=250,
    )
