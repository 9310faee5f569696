"""One text in two formats: does Goldfish still keep it from being memorized? (Apertus section 5.4.2.)

    python -m experiments.memorization --config=configs/studies/memorization_formats.py --out=workdir/formats
    python -m experiments.memorization --config=configs/studies/memorization_formats.py --out=workdir/formats \
        --config.goldfish.hash=canonical

The runs of `configs/studies/memorization_tiny.py` (same model, steps and schedule), with 6 sonnets injected in their
original line-broken form and, as a second component with the same seed, the same sonnets run on in one
paragraph (`apertus_jax.data.memorization.probes.reflow`), 16 or 64 times in each format (so the most-repeated ones
are seen 128 times, as the top bucket of the single-format study). The probes scored are the original
format. With the token hash ("apertus") the two formats drop different tokens, with "canonical" the same
ones; the second command reuses the standard run of the first and adds "goldfish_k4_canonical".
"""

from configs.studies import memorization_tiny


def get_config():
    config = memorization_tiny.get_config()
    run = config.run
    tokens = memorization_tiny.STEPS * memorization_tiny.ROWS * memorization_tiny.SEQ_LEN
    # The probes take ~17% of the tokens: their occurrences are spread over the first 75% of the mixture.
    probes = dict(kind="probes", source="sonnets", repetitions=[16, 64], per_bucket=3, unseen=3, seed=0)
    run.data.pipeline.components = dict(
        demo=dict(kind="demo", sources=["german_prose"]),
        probes=dict(probes, format="original", spread_tokens=int(0.75 * tokens)),
        probes_reflowed=dict(probes, format="reflowed", spread_tokens=int(0.75 * tokens)),
        canaries=dict(
            kind="canaries", repetitions=[4], per_bucket=2, unseen=2, spread_tokens=int(0.75 * tokens)
        ),
    )
    config.prefix_lengths = (16, 32)
    config.num_candidates = 255
    config.resume_check = False
    return config
