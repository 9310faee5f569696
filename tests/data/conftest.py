"""Shared fixtures of the data pipeline tests: the tekken tokenizer and real text from the demo corpus."""

import json

import pytest

from apertus_jax.data.config import parse_pipeline
from apertus_jax.data.demo_corpus import load_german_prose
from apertus_jax.data.pipeline import TrainIterator
from apertus_jax.tokenizers import load_tokenizer


@pytest.fixture(scope="session")
def tekken():
    return load_tokenizer("tekken")


@pytest.fixture(scope="session")
def german_jsonl(tmp_path_factory):
    """A JSONL file of 200 German prose documents (real text) with ids and a score field."""
    path = tmp_path_factory.mktemp("raw") / "german.jsonl"
    documents = load_german_prose()[:200]
    with path.open("w", encoding="utf-8") as f:
        for index, document in enumerate(documents):
            record = {"text": document["text"], "id": document["doc_id"], "score": float((index * 37) % 11)}
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def train_iterator(config, tokenizer, seq_len, batch_size, process_index=0, process_count=1, seed=0):
    """The pipeline's `TrainIterator` of a `data.pipeline` dict (parsed as a run's config would be)."""
    return TrainIterator(
        parse_pipeline(config),
        tokenizer,
        seq_len=seq_len,
        batch_size=batch_size,
        process_index=process_index,
        process_count=process_count,
        seed=seed,
    )
