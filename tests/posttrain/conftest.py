"""Fixtures of the post-training tests: the 4,096-id demo BPE, the tiny chat and preference sets."""

import os

import pytest

import apertus_jax.posttrain

ASSETS = os.path.join(os.path.dirname(apertus_jax.posttrain.__file__), "assets")


@pytest.fixture(scope="session")
def tokenizer():
    from apertus_jax.data.run_tokenizer import demo_tokenizer

    return demo_tokenizer(4096)


@pytest.fixture(scope="session")
def chat_path():
    return os.path.join(ASSETS, "chat_tiny.jsonl")


@pytest.fixture(scope="session")
def preference_path():
    return os.path.join(ASSETS, "qrpo_tiny.jsonl")


@pytest.fixture()
def write_jsonl(tmp_path):
    """lines (str or JSON-able) -> path of a JSONL file holding them."""
    import json

    def write(lines, name="data.jsonl"):
        path = tmp_path / name
        path.write_text(
            "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
        )
        return str(path)

    return write


@pytest.fixture(scope="session")
def small_model(tiny_model):
    """The tiny Apertus over the demo BPE: (its AbstractParams, its parameters)."""
    return tiny_model(vocab_size=4096, max_seq_len=128)
