"""The tiny run the CPU test configs share: a 2-layer width-32 Apertus with the 1,024-id demo BPE on the
UDHR part of the demo corpus (long documents, ~3,000 tokens each), rows of `seq_len` tokens.

`configs/runs/tiny_resume.py`, `configs/runs/tiny_long_context.py` and `configs/ablations/tiny.py` start from it and
set their own steps, batches, schedule and checkpoints.
"""

import ml_collections

from apertus_jax.config.schema import base_config
from apertus_jax.models.presets import model_section


def tiny_udhr_config(seq_len: int, **model_overrides) -> ml_collections.ConfigDict:
    """The base config with the tiny model (`max_seq_len = seq_len` unless overridden) and the UDHR data."""
    config = base_config()
    model = dict(
        vocab_size=1024,
        d_model=32,
        n_heads=2,
        n_kv_heads=1,
        head_dim=16,
        mlp_hidden=64,
        max_seq_len=seq_len,
    )
    config.model = model_section("tiny", **{**model, **model_overrides})
    config.data.demo_tokenizer_vocab = 1024
    config.data.pipeline.components.demo.sources = ["udhr"]
    config.data.seq_len = seq_len
    return config
