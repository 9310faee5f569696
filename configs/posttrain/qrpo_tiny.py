"""Length-normalized QRPO of the tiny SFT model on the tiny preference set (CPU, about a minute).

    python -m experiments.qrpo --config=configs/posttrain/qrpo_tiny.py \\
        --config.checkpoint.init_from=workdir/sft_tiny --workdir=workdir/qrpo_tiny
    python -m experiments.qrpo --config=configs/posttrain/qrpo_tiny.py --config.posttrain.objective=dpo \\
        --config.posttrain.beta=0.1 --config.optim.peak_lr=3e-4 \\
        --config.checkpoint.init_from=workdir/sft_tiny --workdir=workdir/dpo_tiny   # DPO baseline

Reference = policy init = the SFT workdir's parameters; reference log-probs cached once in
WORKDIR/reference_logprobs.json. b = 5 as in Apertus (docs/recipe.md section 11); AdEMAMix b3 0.99, alpha 8,
schedulers over the whole run.
"""

import os

from configs.posttrain import sft_tiny

STEPS, ROWS, SEQ_LEN = 30, 4, 128


def get_config():
    config = sft_tiny.get_config()
    config.unlock()
    config.posttrain.data = (os.path.join(sft_tiny.ASSETS, "qrpo_tiny.jsonl"),)
    config.train.steps = STEPS
    config.train.batch_plan = ((0, ROWS * SEQ_LEN),)
    sft_tiny.post_training_optimizer(config, STEPS, ROWS, SEQ_LEN, peak_lr=1e-5)
    config.posttrain.objective = "qrpo"
    config.posttrain.beta = 5.0
    config.checkpoint.every_steps = 10
    config.checkpoint.init_from = "workdir/sft_tiny"
    config.lock()
    return config
