"""Tokenizers behind one interface, BPE training and multilingual fairness metrics.

`load_tokenizer("tekken" | "sentencepiece:/path.model" | "hf:/path/tokenizer.json") -> Tokenizer`.
- `base`: the `Tokenizer` interface;
- `load`: one string names any tokenizer (`SPEC_FORMS`, "demo" included);
- `tekken`, `sentencepiece_model`, `hf`: the tokenizers;
- `hf_export`: a `Tokenizer` as a HF `tokenizer.json`;
- `train`: BPE training with SentencePiece;
- `fairness`, `words`, `scripts`: fertility, parity and Gini; word segmentation; writing systems;
- `report`: the fairness report of tokenizers on a parallel corpus.
"""

from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.tokenizers.load import load_tokenizer

__all__ = ["Tokenizer", "load_tokenizer"]
