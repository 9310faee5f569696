"""The Apertus recipe ablation (docs/recipe.md section 12): a Llama baseline, each recipe change alone, all.

    python -m experiments.ablate --config=configs/ablations/apertus_components.py --workdir=/tmp/ablations/apertus_recipe

Baseline: Llama-style (SwiGLU, no QK-norm), AdamW, cosine schedule, no Goldfish. Variants change one thing:
`xielu` (ungated xIELU MLP at 1.5x the hidden size: the same parameters as the gated SwiGLU), `ademamix`,
`qk_norm`, `wsd` (warmup-stable-decay with a 1-sqrt cooldown over the last 20%), `goldfish` (k=50, h=50);
`full` has them all. Every run has the same model width, data, learning rate and token budget.

CPU size (the default): 2 layers of width 64, the 1,024-id demo BPE, 150 steps of 16 x 64 tokens (154k
tokens) on the demo corpus (German prose 80%, UDHR 20%), held-out loss (4,096 tokens per component) every
25 steps, 3 seeds. Pod sizes
by overrides (docs/ablations.md): `--set=model.preset=apertus-1.5b` (or apertus-3b) with the data, steps
and batch of `configs/runs/ablation_1p5b.py`.
"""

from apertus_jax.config.schema import base_config
from apertus_jax.models.presets import model_section

STEPS = 150
ROWS, SEQ_LEN = 16, 64
TOKENS = STEPS * ROWS * SEQ_LEN

MODEL = dict(vocab_size=1024, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16, max_seq_len=SEQ_LEN)
SWIGLU_HIDDEN = 128
# The Llama switches of every variant: a no-op on the CPU base (tiny-llama); on an Apertus preset given with
# --set=model.preset=... they turn it into its Llama twin (gated SwiGLU at 2/3 of the ungated hidden size, as
# Llama-3.2-1B's 8,192 is to apertus-1.5b's 12,288; no QK-norm).
LLAMA = {
    "model.mlp_hidden": lambda c: (
        c.model.mlp_hidden * 2 // 3 if c.model.mlp_type == "xielu" else c.model.mlp_hidden
    ),
    "model.mlp_type": "swiglu",
    "model.qk_norm": False,
}
# xIELU is ungated (2 matrices instead of 3): 1.5x the hidden size keeps the parameter count (report §2.4).
XIELU = {"model.mlp_type": "xielu", "model.mlp_hidden": lambda c: c.model.mlp_hidden * 3 // 2}
ADEMAMIX = {
    "optim.name": "ademamix",
    "optim.alpha_warmup_steps": lambda c: c.train.steps,
    "optim.b3_warmup_steps": lambda c: c.train.steps,
}
QK_NORM = {"model.qk_norm": True}
WSD = {
    "optim.schedule": "wsd",
    "optim.decay_shape": "1-sqrt",
    "optim.decay_tokens": lambda c: c.optim.total_tokens // 5,
}
GOLDFISH = {"data.pipeline.goldfish.k": 50, "data.pipeline.goldfish.h": 50}


def llama_baseline():
    """The baseline run config (unlocked)."""
    config = base_config()
    config.model = model_section("tiny-llama", **MODEL, mlp_hidden=SWIGLU_HIDDEN)
    config.data.demo_tokenizer_vocab = MODEL["vocab_size"]
    config.data.seq_len = SEQ_LEN
    config.data.pipeline.components = dict(
        prose=dict(kind="demo", sources=["german_prose"], weight=0.8),
        udhr=dict(kind="demo", sources=["udhr"], weight=0.2),
    )
    config.data.pipeline.goldfish.k = 0
    config.train.steps = STEPS
    config.train.batch_plan = ((0, ROWS * SEQ_LEN),)
    config.optim.name = "adamw"
    config.optim.schedule = "cosine"
    config.optim.peak_lr = 3e-3
    config.optim.warmup_tokens = TOKENS // 10
    config.optim.total_tokens = TOKENS
    config.optim.clip_norm = 1.0
    config.checkpoint.every_steps = 100
    config.eval.every_steps = 25
    config.eval.heldout_tokens = 4096
    config.eval.tasks = ()  # at this size multiple choice sits at chance: held-out loss is the signal
    return config


def get_ablation():
    return dict(
        base=llama_baseline(),
        variants={
            "llama": [LLAMA],
            "xielu": [LLAMA, XIELU],
            "ademamix": [LLAMA, ADEMAMIX],
            "qk_norm": [LLAMA, QK_NORM],
            "wsd": [LLAMA, WSD],
            "goldfish": [LLAMA, GOLDFISH],
            "full": [LLAMA, XIELU, ADEMAMIX, QK_NORM, WSD, GOLDFISH],
        },
        seeds=(0, 1, 2),
        baseline="llama",
    )
