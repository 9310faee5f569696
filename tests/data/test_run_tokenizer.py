"""The run's tokenizer from the data section: the cached demo BPE, a spec, a missing file."""

import copy
import os

import pytest

from apertus_jax.data.config import DataConfig
from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.data.run_tokenizer import (
    TokenizerMismatchError,
    check_tokenized_with,
    demo_tokenizer_path,
    run_tokenizer,
    spec_of,
)


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


def test_the_spec_of_a_recorded_tokenizer_name():
    texts = [d["text"] for d in load_demo_documents("train")]
    demo_name = "sentencepiece:" + os.path.basename(demo_tokenizer_path(4096, texts))
    assert spec_of(demo_name) == "demo"
    assert spec_of("sentencepiece:my_bpe.model") == "sentencepiece:.../my_bpe.model"
    assert spec_of("tekken") == "tekken"


def test_data_of_another_tokenizer_is_one_short_line_naming_both_fixes(tekken):
    """The case of a new user's trial: shards of their own BPE, a run on the demo BPE (then, 460 characters
    with only the fix of re-tokenizing)."""
    demo_name = "sentencepiece:demo_bpe4096_cov98_c7138846386b.model"
    written = {"name": "sentencepiece:my_bpe.model", "checksum": "240391a613febc1538a6f9b27f3bcc78d13d3f89"}
    check_tokenized_with("shards/manifest.json", {"name": "tekken", "checksum": tekken.checksum}, tekken)
    demo = copy.copy(tekken)
    demo.name = demo_name
    with pytest.raises(TokenizerMismatchError) as raised:
        check_tokenized_with("my_shards", written, demo)
    message = str(raised.value)
    assert message == (
        "my_shards: tokenized with sentencepiece:my_bpe.model (sha256 240391a613fe), the run with "
        f"{demo_name} (sha256 {tekken.checksum[:12]}); train with "
        "--config.data.tokenizer=sentencepiece:.../my_bpe.model, or re-tokenize with experiments.tokenize_data "
        "--tokenizer=demo"
    )
    assert len(message) < 300
