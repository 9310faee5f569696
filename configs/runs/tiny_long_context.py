"""Tiny CPU context extension (docs/long_context.md): a short-row pretraining run, then two stages at 2x and
4x its length with a larger RoPE theta each, the tokens per batch kept (16 -> 8 -> 4 rows of 32 -> 64 -> 128
tokens), the LR warmed up again at each stage and then constant.

    python -m experiments.pretrain --config=configs/runs/tiny_long_context.py:pretrain --workdir=/tmp/lc/pretrain
    python -m experiments.long_context --config=configs/runs/tiny_long_context.py \\
        --init_from=/tmp/lc/pretrain --workdir=/tmp/lc/stages

The mesh puts every device on the context axis (`mesh.context = -1`): on one CPU device it is a plain run,
with 8 virtual devices (XLA_FLAGS=--xla_force_host_platform_device_count=8) each row is split 8 ways.
"""

from apertus_jax.jobs.long_context import ContextStage, stage_config
from configs.recipes.tiny_udhr import tiny_udhr_config

PRETRAIN_SEQ_LEN = 32
BATCH_TOKENS = 16 * PRETRAIN_SEQ_LEN
STAGES = (
    ContextStage("2x", seq_len=64, rope_theta=40_000.0, tokens=6 * BATCH_TOKENS, context=-1),
    ContextStage("4x", seq_len=128, rope_theta=160_000.0, tokens=6 * BATCH_TOKENS, context=-1),
)


def _base():
    config = tiny_udhr_config(seq_len=PRETRAIN_SEQ_LEN, rope_theta=10_000.0)
    config.train.batch_plan = ((0, BATCH_TOKENS),)
    config.optim.clip_norm = 1.0
    config.mesh.data, config.mesh.fsdp, config.mesh.tensor, config.mesh.context = 1, 1, 1, -1
    config.checkpoint.every_steps = 2
    config.checkpoint.keep = 50
    return config


def pretrain_config():
    """The short-row run the stages start from: 8 steps of 16 x 32 tokens, WSD with a short cooldown."""
    config = _base()
    config.train.steps = 8
    config.optim.peak_lr = 1e-2
    config.optim.warmup_tokens = 2 * BATCH_TOKENS
    config.optim.decay_tokens = 2 * BATCH_TOKENS
    config.optim.total_tokens = 8 * BATCH_TOKENS
    return config


def get_config(stage: str = "2x"):
    """Stage `stage` ("2x" | "4x"), or "pretrain" for the run the stages start from."""
    if stage == "pretrain":
        config = pretrain_config()
    else:
        by_name = {s.name: s for s in STAGES}
        if stage not in by_name:
            raise ValueError(f"unknown stage {stage!r}; use pretrain or one of {sorted(by_name)}")
        config = stage_config(
            _base(), by_name[stage], batch_tokens=BATCH_TOKENS, peak_lr=1e-3, warmup_tokens=2 * BATCH_TOKENS
        )
    config.lock()
    return config
