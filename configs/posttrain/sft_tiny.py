"""SFT of the tiny demo model on the tiny chat set (CPU, about a minute).

    python -m experiments.pretrain --config=configs/runs/tiny_demo.py --workdir=workdir/tiny_demo
    python -m experiments.sft --config=configs/posttrain/sft_tiny.py \\
        --config.checkpoint.init_from=workdir/tiny_demo --workdir=workdir/sft_tiny

Starts from the pretraining workdir's parameters (`checkpoint.init_from`, fresh optimizer), the same model
and demo tokenizer; loss only on assistant tokens (docs/posttrain.md). Post-training AdEMAMix settings
(docs/recipe.md section 11): b3 0.99, alpha 8, the alpha/b3 schedulers and the cosine LR over the whole run.
"""

import os

import apertus_jax.posttrain
from configs.runs import tiny_demo

ASSETS = os.path.join(os.path.dirname(apertus_jax.posttrain.__file__), "assets")
STEPS, ROWS, SEQ_LEN = 60, 4, 128


def post_training_optimizer(config, steps: int, rows: int, seq_len: int, peak_lr: float) -> None:
    """AdEMAMix b3 0.99, alpha 8, schedulers over all `steps`; cosine LR with a 10% warmup."""
    config.optim.name = "ademamix"
    config.optim.b3, config.optim.alpha = 0.99, 8.0
    config.optim.alpha_warmup_steps = config.optim.b3_warmup_steps = steps
    config.optim.schedule = "cosine"
    config.optim.peak_lr = peak_lr
    config.optim.total_tokens = steps * rows * seq_len
    config.optim.warmup_tokens = config.optim.total_tokens // 10
    config.optim.decay_tokens = 0
    config.optim.weight_decay = 0.0
    config.optim.clip_norm = 1.0


def get_config():
    config = tiny_demo.get_config()
    config.unlock()
    config.posttrain.data = (os.path.join(ASSETS, "chat_tiny.jsonl"),)
    config.train.steps = STEPS
    config.train.batch_plan = ((0, ROWS * SEQ_LEN),)
    post_training_optimizer(config, STEPS, ROWS, SEQ_LEN, peak_lr=1e-3)
    config.checkpoint.every_steps = 20
    config.checkpoint.init_from = "workdir/tiny_demo"
    config.lock()
    return config
