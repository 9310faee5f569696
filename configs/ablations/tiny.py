"""A 3-variant ablation small enough for a test: learning rate 1e-2 (baseline) vs 3e-3 vs QK-norm off.

    python -m experiments.ablate --config=configs/ablations/tiny.py --workdir=/tmp/tiny_ablation

A 2-layer width-32 model on the UDHR part of the demo corpus, 8 steps of 4 x 64 tokens, held-out loss every
4 steps (no multiple choice: nothing to download). Seconds per run on a CPU.
"""

from configs.recipes.tiny_udhr import tiny_udhr_config


def get_ablation():
    config = tiny_udhr_config(seq_len=64)
    config.train.steps = 8
    config.train.batch_plan = ((0, 4 * 64),)
    config.optim.peak_lr = 1e-2
    config.optim.warmup_tokens = 2 * 256
    config.optim.decay_tokens = 3 * 256
    config.optim.total_tokens = 8 * 256
    config.checkpoint.every_steps = 4
    config.eval.every_steps = 4
    config.eval.heldout_tokens = 1024
    config.eval.tasks = ()
    return dict(
        base=config,
        variants={
            "baseline": {},
            "lr3e-3": {"optim.peak_lr": 3e-3},
            "no_qk_norm": {"model.qk_norm": False},
        },
        seeds=(0,),
        baseline="baseline",
    )
