"""Tokenizers behind one interface, BPE training and multilingual fairness metrics.

`load_tokenizer("tekken" | "sentencepiece:/path.model" | "hf:/path/tokenizer.json") -> Tokenizer`.
"""

from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.tokenizers.load import load_tokenizer

__all__ = ["Tokenizer", "load_tokenizer"]
