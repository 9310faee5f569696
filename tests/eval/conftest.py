"""Fixtures of the evaluation tests: a tiny random model, its log-prob function and the 1,024-id demo BPE (the
workdir, HF-checkpoint and local exams-task fixtures: tests/conftest.py)."""

import jax
import numpy as np
import pytest
from flax import nnx

from apertus_jax.eval.scoring import make_token_logprobs_fn
from apertus_jax.models import create_model, get_config


@pytest.fixture(scope="session")
def tiny_model():
    """A 2-layer Apertus (vocab 1024, width 32), random weights with a large init so scores vary."""
    config = get_config(
        "tiny",
        vocab_size=1024,
        d_model=32,
        n_heads=4,
        n_kv_heads=2,
        head_dim=8,
        mlp_hidden=64,
        max_seq_len=128,
        init_std=0.5,
    )
    return create_model(config, seed=1)


@pytest.fixture(scope="session")
def token_logprobs(tiny_model):
    return make_token_logprobs_fn(tiny_model)


@pytest.fixture(scope="session")
def forward(tiny_model):
    """The tiny model's plain forward, jitted (reference logits for the scoring tests)."""
    graphdef, state = nnx.split(tiny_model)
    jitted = jax.jit(lambda state, *args: nnx.merge(graphdef, state)(*args))
    return lambda tokens, positions, segment_ids: np.asarray(
        jitted(state, tokens, positions, segment_ids), np.float64
    )


@pytest.fixture(scope="session")
def tokenizer():
    from apertus_jax.data.run_tokenizer import demo_tokenizer

    return demo_tokenizer(1024)
