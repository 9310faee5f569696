"""load_tokenizer: spec parsing and one-line errors."""

import pytest

from apertus_jax.tokenizers import load_tokenizer


@pytest.mark.parametrize("spec", ["", "tiktoken", "tekken:extra", "sentencepiece", "hf:", "spm:/x.model"])
def test_unknown_spec(spec):
    with pytest.raises(ValueError, match="unknown tokenizer spec"):
        load_tokenizer(spec)


@pytest.mark.parametrize("spec", ["sentencepiece:/no/such.model", "hf:/no/such/tokenizer.json"])
def test_missing_file(spec):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_tokenizer(spec)
