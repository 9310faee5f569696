"""The tokenizer interface shared by the data pipeline, training and the fairness report.

Every tokenizer maps text to integer ids without special tokens (`encode`), back to text (`decode`),
and frames a document as `[BoD] + ids + [EoD]` (`encode_document`, docs/recipe.md section 2). `checksum` is the
sha256 of the tokenizer file, so shards written with one tokenizer are never read with another.
"""

import abc
from collections.abc import Iterable, Sequence

import numpy as np


class Tokenizer(abc.ABC):
    """Text <-> token ids, with the special-token ids the pipeline needs.

    Attributes:
        name: short human-readable name, e.g. "tekken" or "hf:tokenizer.json".
        vocab_size: number of ids; every id returned by `encode` is in [0, vocab_size).
        bod_id: beginning-of-document id (`<s>`).
        eod_id: end-of-document id (`</s>`); the packer's document separator.
        pad_id: padding id (never a target, attends to nothing; docs/recipe.md section 2).
        checksum: sha256 hex digest of the tokenizer file.
    """

    def __init__(self, *, name: str, vocab_size: int, bod_id: int, eod_id: int, pad_id: int, checksum: str):
        self.name = name
        self.vocab_size = int(vocab_size)
        self.bod_id = int(bod_id)
        self.eod_id = int(eod_id)
        self.pad_id = int(pad_id)
        self.checksum = checksum

    @abc.abstractmethod
    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, without any special tokens."""

    @abc.abstractmethod
    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`; special-token ids are dropped."""

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """`[encode(t) for t in texts]`; subclasses override it with a multi-threaded encoder."""
        return [self.encode(text) for text in texts]

    def encode_document(self, text: str) -> np.ndarray:
        """`[bod_id] + encode(text) + [eod_id]` as an int32 array of shape [len(ids) + 2]."""
        return np.asarray([self.bod_id, *self.encode(text), self.eod_id], dtype=np.int32)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, vocab_size={self.vocab_size}, "
            f"bod_id={self.bod_id}, eod_id={self.eod_id}, pad_id={self.pad_id})"
        )
