"""`load_tokenizer(spec)`: one string names any tokenizer the pipeline can use.

Specs: "tekken" (the Apertus tokenizer, from mistral-common), "sentencepiece:/path/model.model",
"hf:/path/tokenizer.json".
"""

from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.tokenizers.hf import HFTokenizer
from apertus_jax.tokenizers.sentencepiece_model import SentencePieceTokenizer
from apertus_jax.tokenizers.tekken import TekkenTokenizer

SPEC_FORMS = '"tekken", "sentencepiece:/path/model.model" or "hf:/path/tokenizer.json"'


def load_tokenizer(spec: str) -> Tokenizer:
    """Loads the tokenizer named by `spec` (forms in SPEC_FORMS).

    Raises:
      ValueError: an unknown spec form, or a file the tokenizer class rejects.
      FileNotFoundError: the named file does not exist.
    """
    kind, _, path = spec.partition(":")
    if kind == "tekken" and not path:
        return TekkenTokenizer()
    if kind == "sentencepiece" and path:
        return SentencePieceTokenizer(path)
    if kind == "hf" and path:
        return HFTokenizer(path)
    raise ValueError(f"unknown tokenizer spec {spec!r}; use {SPEC_FORMS}")
