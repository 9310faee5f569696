"""Continued pretraining of the released Apertus-8B (docs/recipe.md section 13), the way Apertus v1.5 continued
v1.0: the released weights as a HF checkpoint (`checkpoint.init_from=hf:DIR`; its config.json and
tokenizer.json are checked against this run before anything is written), a fresh AdEMAMix state and a new WSD
schedule over +4T tokens, architecture and tokenizer kept. What the v1.5 sources do not state is an assumption
named below (and in docs/recipe.md): the data mix, the peak learning rate and warm-up, the cooldown share. The
262k-token context extension that followed is a later stage of the form of `apertus_8b_long_context.py`.

    python -m experiments.pretrain --config=configs/runs/apertus_8b_continued.py \\
        --config.checkpoint.init_from=hf:/data/apertus/Apertus-8B-2509 --workdir=...
"""

from configs.recipes.apertus import apertus_recipe, apertus_stages

ADDED_TOKENS = 4 * 10**12  # v1.5 added 4T tokens to the 8B
BATCH_TOKENS = 2048 * 4096  # 8,388,608: the v1.0 batch after its doubling, kept
# The released checkpoint's RoPE base (its config.json, after the v1.0 long-context stages).
RELEASED_ROPE_THETA = 12e6
# Assumptions (not stated by the v1.5 sources): the warm-up and peak of the v1.0 long-context stages, which
# also started AdEMAMix afresh from trained weights; v1.0's cooldown share (the last 1.5T of 15T tokens); the
# mix of v1.0's last stage.
PEAK_LR = 1.1e-5
WARMUP_TOKENS = 1_200_000_000
COOLDOWN_SHARE = 0.1


def get_config():
    config = apertus_recipe("apertus-8b", stage_bounds=(1, 2, 3, 4), tensor=1, every_steps=1000)
    config.model.rope_theta = RELEASED_ROPE_THETA
    pipeline = apertus_stages(stage_bounds=(1, 2, 3, 4))
    last = {**pipeline["stages"][-1], "name": "continued", "until_tokens": None}
    used = set(last["weights"])
    pipeline.update(stages=[last], components={n: c for n, c in pipeline["components"].items() if n in used})
    config.data.pipeline = pipeline
    config.train.batch_plan = ((0, BATCH_TOKENS),)
    config.train.steps = ADDED_TOKENS // BATCH_TOKENS
    config.optim.peak_lr = PEAK_LR
    config.optim.total_tokens = ADDED_TOKENS
    config.optim.warmup_tokens = WARMUP_TOKENS
    config.optim.decay_tokens = int(COOLDOWN_SHARE * ADDED_TOKENS)
    config.checkpoint.init_from = "hf:/data/apertus/Apertus-8B-2509"
    config.lock()
    return config
