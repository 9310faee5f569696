"""Default: a tiny Apertus (xIELU, QK-norm, RoPE) on the vendored multilingual demo corpus, CPU-sized.

    python -m experiments.pretrain --config=configs/runs/tiny_demo.py --workdir=/tmp/apertus_demo

A 4,096-id SentencePiece BPE trained on the demo corpus (cached), 128-token rows, 16 rows per step,
AdEMAMix with WSD (1-sqrt cooldown), Goldfish k=50 h=50 as in Apertus. A few minutes on 2 CPU cores.
"""

from apertus_jax.config.schema import base_config
from apertus_jax.models.presets import model_section


def get_config():
    config = base_config()
    config.model = model_section("tiny", vocab_size=4096, max_seq_len=128)
    config.data.tokenizer = "demo"
    config.data.demo_tokenizer_vocab = 4096
    config.data.seq_len = 128
    # German prose 80%, UDHR (440 languages) 20% of tokens: a tiny model cannot learn 440 languages in
    # 600k tokens, but it learns German quickly while still seeing many scripts.
    config.data.pipeline.components = dict(
        prose=dict(kind="demo", sources=["german_prose"], weight=0.8),
        udhr=dict(kind="demo", sources=["udhr"], weight=0.2),
    )
    config.train.steps = 300
    config.train.batch_plan = ((0, 16 * 128),)
    config.optim.peak_lr = 2e-3
    config.optim.alpha_warmup_steps = config.optim.b3_warmup_steps = 100
    config.optim.warmup_tokens = 20 * 16 * 128
    config.optim.decay_tokens = 60 * 16 * 128
    config.optim.total_tokens = 300 * 16 * 128
    config.optim.clip_norm = 1.0
    config.checkpoint.every_steps = 100
    # Held-out loss and bits per byte of both components, 20 German exam questions: every 100 steps.
    config.eval.every_steps = 100
    config.lock()
    return config
