"""`load_tokenizer(spec)`: one string names any tokenizer the pipeline can use.

Specs: "tekken" (the Apertus tokenizer, from mistral-common), "sentencepiece:/path/model.model",
"hf:/path/tokenizer.json".
"""

from apertus_jax.named import load_named
from apertus_jax.tokenizers.base import Tokenizer

SPEC_FORMS = '"tekken", "sentencepiece:/path/model.model" or "hf:/path/tokenizer.json"'
# "module:Class" by spec kind, and whether the kind takes a path; a class's module is imported when a spec
# first names it
KINDS = {
    "tekken": ("apertus_jax.tokenizers.tekken:TekkenTokenizer", False),
    "sentencepiece": ("apertus_jax.tokenizers.sentencepiece_model:SentencePieceTokenizer", True),
    "hf": ("apertus_jax.tokenizers.hf:HFTokenizer", True),
}


def load_tokenizer(spec: str) -> Tokenizer:
    """Loads the tokenizer named by `spec` (forms in SPEC_FORMS).

    Raises:
      ValueError: an unknown spec form, or a file the tokenizer class rejects.
      FileNotFoundError: the named file does not exist.
    """
    kind, _, path = spec.partition(":")
    if kind not in KINDS or KINDS[kind][1] != bool(path):
        raise ValueError(f"unknown tokenizer spec {spec!r}; use {SPEC_FORMS}")
    cls = load_named(KINDS[kind][0])
    return cls(path) if path else cls()
