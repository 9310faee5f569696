"""The memorization study at CPU scale (Apertus section 5.4.1, Figure 8; docs/recipe.md sections 3 and 12).

    python -m experiments.memorization --config=configs/studies/memorization_tiny.py --out=workdir/memorization

`run` is an ordinary run config (the standard-loss run; the Goldfish run differs only in
`data.pipeline.goldfish`): a small Apertus (d_model 256, 4 layers, 4,096-id demo BPE) on the demo corpus's
German prose, 400 steps of 16 x 128 tokens, with 16 of Shakespeare's sonnets injected 1, 2, 4, ..., 128
times (2 per count, 4 more never seen) and 12 canaries injected 1, 4, 16 or 64 times (2 per count, 4 never
seen), spread over the run. The measured result and its run time are in docs/memorization.md. For a pod run,
point `run` at a real recipe (e.g. `configs/runs/apertus_8b.py`) and add the same two components with more
probes, longer prefixes and suffixes.
"""

import ml_collections

from apertus_jax.config.schema import base_config
from apertus_jax.models.presets import model_section

STEPS, ROWS, SEQ_LEN = 400, 16, 128
# The injected documents take ~19% of the tokens; spreading their occurrences over the first 72% of the
# mixture lets every planned occurrence come before the last step.
SPREAD = 0.72


def run_config() -> ml_collections.ConfigDict:
    config = base_config()
    config.model = model_section("tiny", vocab_size=4096, d_model=256, n_layers=4, max_seq_len=SEQ_LEN)
    config.data.tokenizer = "demo"
    config.data.demo_tokenizer_vocab = 4096
    config.data.seq_len = SEQ_LEN
    tokens = STEPS * ROWS * SEQ_LEN
    config.data.pipeline.components = dict(
        demo=dict(kind="demo", sources=["german_prose"]),
        probes=dict(
            kind="probes",
            source="sonnets",
            repetitions=[1, 2, 4, 8, 16, 32, 64, 128],
            per_bucket=2,
            unseen=4,
            spread_tokens=int(SPREAD * tokens),
            seed=0,
        ),
        canaries=dict(
            kind="canaries",
            repetitions=[1, 4, 16, 64],
            per_bucket=2,
            unseen=4,
            spread_tokens=int(SPREAD * tokens),
            seed=0,
        ),
    )
    config.data.pipeline.goldfish = dict(k=0, h=13, hash="apertus")  # the standard loss
    config.train.steps = STEPS
    config.train.batch_plan = ((0, ROWS * SEQ_LEN),)
    config.optim.name = "adamw"
    config.optim.peak_lr = 3e-3
    config.optim.weight_decay = 0.0
    config.optim.warmup_tokens = 15 * ROWS * SEQ_LEN
    config.optim.decay_tokens = 60 * ROWS * SEQ_LEN
    config.optim.total_tokens = tokens
    config.optim.clip_norm = 1.0
    config.mesh.data = 1
    config.checkpoint.every_steps = 100
    config.checkpoint.keep = 2
    return config


def get_config() -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.run = run_config()
    # The Goldfish run: Hans et al.'s k = 4, h = 13 (Apertus: k = h = 50 on 4,096-token rows).
    config.goldfish = dict(k=4, h=13, hash="apertus")
    config.prefix_lengths = (8, 16, 32, 64)  # prompt tokens taken from the probe
    config.offsets = (0, 64)  # where in the probe the prompt starts (0: with BoD)
    config.suffix_len = 64  # generated and scored tokens
    config.top_p = 0.9  # nucleus sampling at T = 1.0 (docs/recipe.md section 12)
    config.num_candidates = 1023  # random secrets each canary is ranked among (exposure <= 10 bits)
    config.resume_check = True  # a third run: the standard one, stopped after its first checkpoint, resumed
    config.seed = 0
    return config
