"""Apertus-70B context extension (docs/recipe.md section 5; Apertus report section 2.5): 8k / 16k / 32k / 64k
tokens with RoPE theta 1M / 2M / 4M / 8M (the report gives 8M as the 70B's final theta; the earlier stages
follow the 8B), ~8.4M tokens per batch, the LR warmed up again over 1.2B tokens per stage then held at 1e-6;
tensor parallelism 4 as in pretraining, context parallelism growing to 8-way at 64k. Sized for 256 devices.

    python -m experiments.long_context --config=configs/apertus_70b_long_context.py \\
        --init_from=PRETRAIN_WORKDIR --workdir=LONG_CONTEXT_ROOT
"""

from apertus_jax.train.context_stages import ContextStage
from configs.long_context_recipe import STAGE_TOKENS, long_context_stage

BATCH_TOKENS = 2048 * 4096  # 8,388,608 tokens per batch, as the 8B (docs/recipe.md section 5)
DEVICES = 256
STAGES = (
    ContextStage("8k", seq_len=8192, rope_theta=1e6, tokens=STAGE_TOKENS, context=1),
    ContextStage("16k", seq_len=16384, rope_theta=2e6, tokens=STAGE_TOKENS, context=2),
    ContextStage("32k", seq_len=32768, rope_theta=4e6, tokens=STAGE_TOKENS, context=4),
    ContextStage("64k", seq_len=65536, rope_theta=8e6, tokens=STAGE_TOKENS, context=8),
)


def get_config(stage: str = "8k"):
    by_name = {s.name: s for s in STAGES}
    if stage not in by_name:
        raise ValueError(f"unknown stage {stage!r}; use one of {list(by_name)}")
    return long_context_stage(
        "apertus-70b",
        by_name[stage],
        batch_tokens=BATCH_TOKENS,
        peak_lr=1e-6,
        tensor=4,
        devices=DEVICES,
        every_steps=250,
    )
