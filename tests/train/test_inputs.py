"""Run inputs: the run tokenizer from the data config, the sharded iterator's row order and its state."""

import grain
import ml_collections
import numpy as np
import pytest

from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.train import inputs


@pytest.fixture(name="shard_rows", scope="module")
def fixture_shard_rows():
    """Two shards of real text: 16 UTF-8 bytes from the start of UDHR translations, as int32 rows."""
    docs = load_demo_documents("train", ["udhr"])[:24]
    rows = [np.frombuffer(d["text"].encode("utf-8")[:16], np.uint8).astype(np.int32) for d in docs]
    return rows[:12], rows[12:]


def make_shards(shard_rows, rows_per_batch=2):
    return [
        iter(grain.MapDataset.source([{"tokens": r} for r in rows]).batch(rows_per_batch).to_iter_dataset())
        for rows in shard_rows
    ]


def test_batches_concatenate_the_shards_in_order(shard_rows):
    iterator = inputs.ShardedIterator(make_shards(shard_rows))
    first, second = next(iterator), next(iterator)
    np.testing.assert_array_equal(first["tokens"], np.stack([*shard_rows[0][:2], *shard_rows[1][:2]]))
    np.testing.assert_array_equal(second["tokens"], np.stack([*shard_rows[0][2:4], *shard_rows[1][2:4]]))
    assert first["tokens"].shape == (4, 16) and first["tokens"].dtype == np.int32


def test_state_round_trip_resumes_at_the_same_rows(shard_rows):
    iterator = inputs.ShardedIterator(make_shards(shard_rows))
    next(iterator)
    state = iterator.get_state()
    assert len(state["shards"]) == 2
    expected = [next(iterator)["tokens"] for _ in range(2)]
    resumed = inputs.ShardedIterator(make_shards(shard_rows))
    resumed.set_state(state)
    for tokens in expected:
        np.testing.assert_array_equal(next(resumed)["tokens"], tokens)


def test_state_of_another_shard_count_is_refused(shard_rows):
    state = inputs.ShardedIterator(make_shards(shard_rows)).get_state()
    single = inputs.ShardedIterator(make_shards(shard_rows[:1]))
    with pytest.raises(ValueError, match="holds 2 shards, this process reads 1"):
        single.set_state(state)


def test_run_tokenizer_is_the_cached_demo_bpe():
    data = ml_collections.ConfigDict(dict(tokenizer="demo", demo_tokenizer_vocab=1024))
    tokenizer = inputs.load_run_tokenizer(data)
    assert tokenizer.vocab_size == 1024
    assert (tokenizer.bod_id, tokenizer.eod_id, tokenizer.pad_id) == (1, 2, 3)  # the tekken layout
    again = inputs.load_run_tokenizer(data)
    assert again.checksum == tokenizer.checksum  # cached, not retrained
    text = "Alle Menschen sind frei und gleich an Würde und Rechten geboren."
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_demo_tokenizer_cache_is_keyed_on_the_training_texts():
    texts = [d["text"] for d in load_demo_documents("train")]
    path = inputs.demo_tokenizer_path(4096, texts)
    assert inputs.demo_tokenizer_path(4096, list(texts)) == path
    # Same asset files, another split (one training document moved to held-out): another tokenizer file.
    assert inputs.demo_tokenizer_path(4096, texts[:-1]) != path
    assert inputs.demo_tokenizer_path(1024, texts) != path


def test_run_tokenizer_spec_with_a_missing_file(tmp_path):
    data = ml_collections.ConfigDict(dict(tokenizer=f"sentencepiece:{tmp_path}/absent.model"))
    with pytest.raises(FileNotFoundError, match="absent.model"):
        inputs.load_run_tokenizer(data)


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("APERTUS_JAX_CACHE", str(tmp_path))
    assert inputs.cache_dir() == str(tmp_path)
    monkeypatch.delenv("APERTUS_JAX_CACHE")
    assert inputs.cache_dir().endswith("/.cache/apertus_jax")
