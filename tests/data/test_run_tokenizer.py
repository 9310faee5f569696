"""The run's tokenizer from the data section: the cached demo BPE, a spec, a missing file."""

import pytest

from apertus_jax.data.config import DataConfig
from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.data.run_tokenizer import demo_tokenizer_path, run_tokenizer


@pytest.mark.slow
def test_run_tokenizer_is_the_cached_demo_bpe():
    data = DataConfig(tokenizer="demo", demo_tokenizer_vocab=1024)
    tokenizer = run_tokenizer(data.tokenizer, data.demo_tokenizer_vocab)
    assert tokenizer.vocab_size == 1024
    assert (tokenizer.bod_id, tokenizer.eod_id, tokenizer.pad_id) == (1, 2, 3)  # the tekken layout
    again = run_tokenizer(data.tokenizer, data.demo_tokenizer_vocab)
    assert again.checksum == tokenizer.checksum  # cached, not retrained
    text = "Alle Menschen sind frei und gleich an Würde und Rechten geboren."
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_demo_tokenizer_cache_is_keyed_on_the_training_texts():
    texts = [d["text"] for d in load_demo_documents("train")]
    path = demo_tokenizer_path(4096, texts)
    assert demo_tokenizer_path(4096, list(texts)) == path
    # Same asset files, another split (one training document moved to held-out): another tokenizer file.
    assert demo_tokenizer_path(4096, texts[:-1]) != path
    assert demo_tokenizer_path(1024, texts) != path


def test_run_tokenizer_spec_with_a_missing_file(tmp_path):
    data = DataConfig(tokenizer=f"sentencepiece:{tmp_path}/absent.model")
    with pytest.raises(FileNotFoundError, match="absent.model"):
        run_tokenizer(data.tokenizer, data.demo_tokenizer_vocab)
