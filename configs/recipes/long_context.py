"""The Apertus context extension shared by `apertus_8b_long_context.py` and `apertus_70b_long_context.py`
(docs/recipe.md section 5; docs/long_context.md).

Each stage is its own run (`apertus_jax.jobs.long_context.stage_config`) on top of the pretraining recipe
(`configs/recipes/apertus.py`: model, AdEMAMix, clipping, Goldfish, bf16, remat): the stage's length and RoPE
theta, a fixed batch of `batch_tokens`, the LR warmed up again from 0 over 1.2B tokens, then constant, and the
long-context data mixture (docs/recipe.md section 5; Apertus report section 3.4): 70% the stage-5 mixture,
20% FineWeb-Long, 10% Institutional Books, with longer FineWeb-HQ / FineWeb-2-HQ documents upsampled by
length bucket (`length_buckets` in the data config).
"""

from apertus_jax.jobs.long_context import ContextStage, stage_config
from configs.recipes.apertus import apertus_recipe

WARMUP_TOKENS = 1_200_000_000  # per stage (Apertus report section 2.5)
# Tokens per stage: the report's Table 8 counts are not in our sources; 24B tokens (20 warmups) per stage is
# our placeholder. Set your own budget here.
STAGE_TOKENS = 24_000_000_000
QUERY_BLOCK = 512
LENGTH_BUCKETS = dict(edges=[4096, 16384], token_shares=[0.4, 0.3, 0.3])


def long_context_pipeline(root: str = "/data/apertus") -> dict:
    """The long-context `data.pipeline`: ArrayRecord shard sets `root/<component>` in the report's shares."""
    stage5 = {
        "dclm_edu": 0.6,
        "fineweb2_hq": 0.1,
        "stack_v2_edu": 0.08,
        "starcoder": 0.05,
        "wikipedia": 0.07,
        "parallel": 0.03,
        "instruct": 0.07,
    }
    weights = {name: 0.7 * share for name, share in stage5.items()}
    weights.update(fineweb_hq=0.0, fineweb_long=0.2, institutional_books=0.1)
    # FineWeb-HQ takes half of FineWeb-2-HQ's stage-5 share so both get their long documents upsampled.
    weights["fineweb_hq"] = weights["fineweb2_hq"] = 0.035
    components = {name: dict(kind="arrayrecord", paths=[f"{root}/{name}"]) for name in weights}
    for name in ("fineweb_hq", "fineweb2_hq"):
        components[name]["length_buckets"] = dict(LENGTH_BUCKETS)
    return dict(
        components=components,
        stages=[dict(name="long_context", until_tokens=None, weights=weights, seed=6)],
        split_seed=0,
    )


def apertus_stages(final_rope_theta: float, contexts: tuple[int, int, int, int]) -> tuple[ContextStage, ...]:
    """The report's four stages, 8k / 16k / 32k / 64k tokens with RoPE theta 1M / 2M / 4M / `final_rope_theta`,
    each of `STAGE_TOKENS`, with `contexts[i]`-way context parallelism."""
    lengths, thetas = (8192, 16384, 32768, 65536), (1e6, 2e6, 4e6, final_rope_theta)
    return tuple(
        ContextStage(f"{length // 1024}k", seq_len=length, rope_theta=theta, tokens=STAGE_TOKENS, context=c)
        for length, theta, c in zip(lengths, thetas, contexts)
    )


def long_context_stage(
    preset: str,
    stages: tuple[ContextStage, ...],
    name: str,
    *,
    batch_tokens: int,
    peak_lr: float,
    tensor: int,
    devices: int,
    every_steps: int,
):
    """Stage `name` of `stages` for model preset `preset` as a locked run config. Microbatches hold one row per
    batch-sharded device on `devices` devices (`devices / (tensor * context)` rows).

    Raises:
      ValueError: `name` is not one of the stages.
    """
    by_name = {s.name: s for s in stages}
    if name not in by_name:
        raise ValueError(f"unknown stage {name!r}; use one of {list(by_name)}")
    stage = by_name[name]
    base = apertus_recipe(preset, stage_bounds=(1, 2, 3, 4), tensor=tensor, every_steps=every_steps)
    base.data.pipeline = long_context_pipeline()
    # Used where attention runs as XLA einsums (the memory plan on CPU devices); cuDNN never builds the
    # [heads, T, T] scores.
    base.model.attention_query_block = QUERY_BLOCK
    config = stage_config(
        base, stage, batch_tokens=batch_tokens, peak_lr=peak_lr, warmup_tokens=WARMUP_TOKENS
    )
    config.train.microbatch_size = devices // (tensor * stage.context)
    config.lock()
    return config


def extension_262k_stages(theta_64k: float, contexts: tuple[int, int]) -> tuple[ContextStage, ...]:
    """Apertus v1.5's extension after the 64k stage (docs/recipe.md section 13): 128k and 256k tokens (131,072
    and 262,144), RoPE theta doubled with each doubling of the length from `theta_64k` (v1.5's settings are not
    public), each of `STAGE_TOKENS`, with `contexts[i]`-way context parallelism."""
    return tuple(
        ContextStage(
            f"{length // 1024}k",
            seq_len=length,
            rope_theta=theta_64k * factor,
            tokens=STAGE_TOKENS,
            context=c,
        )
        for length, factor, c in zip((131_072, 262_144), (2, 4), contexts)
    )
