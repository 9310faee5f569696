"""Apertus ablation size (~1.5B, Llama-3.2-1B shape with the 1.5x ungated xIELU MLP): the recipe's
architecture and optimizer at a scale for 100B-token ablations (AdEMAMix + WSD, Goldfish, clipping 0.1).
"""

from apertus_jax.config.schema import base_config
from apertus_jax.models.presets import model_section

SEQ_LEN = 4096
BATCH_TOKENS = 256 * SEQ_LEN  # ~1M tokens per step
TOTAL_TOKENS = 100_000 * BATCH_TOKENS  # ~105B tokens


def get_config():
    config = base_config()
    config.model = model_section(
        "apertus-1.5b", dtype="bfloat16", scan_layers=True, remat_policy="full", attention_impl="cudnn"
    )
    config.data.tokenizer = "tekken"
    config.data.seq_len = SEQ_LEN
    config.data.pipeline = dict(
        components=dict(web=dict(kind="arrayrecord", paths=["/data/apertus/fineweb_edu"])),
        split_seed=0,
    )
    config.train.steps = TOTAL_TOKENS // BATCH_TOKENS
    config.train.batch_plan = ((0, BATCH_TOKENS),)
    config.optim.peak_lr = 1e-3
    config.optim.warmup_tokens = 2_000 * BATCH_TOKENS
    config.optim.decay_tokens = 20_000 * BATCH_TOKENS
    config.optim.total_tokens = TOTAL_TOKENS
    config.optim.alpha_warmup_steps = config.optim.b3_warmup_steps = 10_000
    config.mesh.data, config.mesh.fsdp, config.mesh.tensor = 1, -1, 1
    config.checkpoint.every_steps = 1000
    config.lock()
    return config
