"""Boldt-style 350M German model (Llama architecture, SwiGLU, 32k BPE per data subset, AdamW + cosine),
trained on a small high-quality subset repeated for several epochs (the Boldt data-filtering study).
"""

from apertus_jax.config.schema import base_config
from apertus_jax.models.presets import model_section

SEQ_LEN = 2048
BATCH_TOKENS = 256 * SEQ_LEN  # ~0.5M tokens per step
TOTAL_TOKENS = 20_000 * BATCH_TOKENS  # ~10.5B tokens


def get_config():
    config = base_config()
    config.model = model_section("boldt-350m", dtype="bfloat16", attention_impl="cudnn")
    config.data.tokenizer = "sentencepiece:/data/boldt/tokenizers/high_quality.model"
    config.data.seq_len = SEQ_LEN
    config.data.pipeline = dict(
        components=dict(high_quality=dict(kind="arrayrecord", paths=["/data/boldt/high_quality"], epochs=4)),
        goldfish=dict(k=0),
        split_seed=0,
    )
    config.train.steps = TOTAL_TOKENS // BATCH_TOKENS
    config.train.batch_plan = ((0, BATCH_TOKENS),)
    config.optim.name = "adamw"
    config.optim.schedule = "cosine"
    config.optim.peak_lr = 1e-3
    config.optim.warmup_tokens = 500 * BATCH_TOKENS
    config.optim.total_tokens = TOTAL_TOKENS
    config.optim.b2 = 0.95
    config.optim.clip_norm = 1.0
    config.mesh.data, config.mesh.fsdp, config.mesh.tensor = -1, 1, 1
    config.checkpoint.every_steps = 1000
    config.lock()
    return config
