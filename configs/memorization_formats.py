"""One text in two formats: does Goldfish still keep it from being memorized? (Apertus section 5.4.2.)

    python -m experiments.memorization --config=configs/memorization_formats.py --out=workdir/formats
    python -m experiments.memorization --config=configs/memorization_formats.py --out=workdir/formats \
        --config.goldfish.hash=canonical

The runs of `configs/memorization_tiny.py` at half the steps, with 9 sonnets injected in their original
line-broken form and, as a second component with the same seed, the same sonnets run on in one paragraph
(`apertus_jax.data.injection.reflow`), 8 or 32 times in each format. The probes scored are the original
format. With the token hash ("apertus") the two formats drop different tokens, with "canonical" the same
ones; the second command reuses the standard run of the first and adds "goldfish_k4_canonical".
"""

from configs import memorization_tiny

STEPS, ROWS, SEQ_LEN = 150, 16, 128


def get_config():
    config = memorization_tiny.get_config()
    run = config.run
    tokens = STEPS * ROWS * SEQ_LEN
    probes = dict(kind="probes", source="sonnets", repetitions=[8, 32], per_bucket=3, unseen=3, seed=0)
    run.data.pipeline.components = dict(
        demo=dict(kind="demo", sources=["german_prose"]),
        probes=dict(probes, format="original", spread_tokens=int(0.75 * tokens)),
        probes_reflowed=dict(probes, format="reflowed", spread_tokens=int(0.75 * tokens)),
        canaries=dict(
            kind="canaries", repetitions=[4], per_bucket=2, unseen=2, spread_tokens=int(0.75 * tokens)
        ),
    )
    run.train.steps = STEPS
    run.optim.warmup_tokens = 10 * ROWS * SEQ_LEN
    run.optim.decay_tokens = 30 * ROWS * SEQ_LEN
    run.optim.total_tokens = tokens
    run.checkpoint.every_steps = 50
    config.prefix_lengths = (16, 32)
    config.num_candidates = 255
    config.resume_check = False
    return config
