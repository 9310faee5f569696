"""`TokenizerVocabulary`: our `Tokenizer` as a `seqio.Vocabulary`, shared by seqio import and export.

Needs the optional extra `pip install "apertus_jax[seqio]"` (seqio pulls TensorFlow; keep it out of the
training environment). BoD = `bos_id`, EoD = `eos_id`, `pad_id` = the tokenizer's pad; vocabularies are equal
when the tokenizer checksums are.
"""

from __future__ import annotations

import numpy as np

try:
    import seqio
    import tensorflow as tf
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"apertus_jax.data.seqio.vocabulary needs seqio ({error}); install the extra: "
        "pip install 'apertus_jax[seqio]' (in a separate environment: it pulls TensorFlow)"
    ) from error


class TokenizerVocabulary(seqio.Vocabulary):
    """Our `Tokenizer` (`apertus_jax.tokenizers`) as a `seqio.Vocabulary`.

    `encode`/`decode` are the tokenizer's (no special tokens in, special tokens dropped out; seqio's
    `decode` stops after the first EoD); `encode_tf` takes a scalar string and returns int32 ids `[L]`,
    `decode_tf` takes int32 ids `[..., L]` and returns strings `[...]` (both run the tokenizer in
    `tf.py_function`, so they work in eager mode and in `tf.data` maps, not in exported graphs).
    """

    def __init__(self, tokenizer):
        super().__init__(extra_ids=0)
        self.tokenizer = tokenizer

    @property
    def bos_id(self) -> int:
        return self.tokenizer.bod_id

    @property
    def eos_id(self) -> int:
        return self.tokenizer.eod_id

    @property
    def pad_id(self) -> int:
        return self.tokenizer.pad_id

    @property
    def unk_id(self) -> None:
        return None

    @property
    def _base_vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def _encode(self, s: str) -> list[int]:
        return self.tokenizer.encode(s)

    def _decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids])

    def _encode_tf(self, s: tf.Tensor) -> tf.Tensor:
        def encode(text):
            return np.asarray(self.tokenizer.encode(text.numpy().decode("utf-8")), np.int32)

        ids = tf.py_function(encode, [s], tf.int32)
        ids.set_shape([None])
        return ids

    def _decode_tf(self, ids: tf.Tensor) -> tf.Tensor:
        def decode(batch):
            array = batch.numpy()
            rows = array.reshape(-1, array.shape[-1])
            texts = [self.tokenizer.decode(row.tolist()).encode("utf-8") for row in rows]
            return np.asarray(texts, dtype=object).reshape(array.shape[:-1])

        text = tf.py_function(decode, [ids], tf.string)
        text.set_shape(ids.shape[:-1])
        return text

    def __eq__(self, other) -> bool:
        return isinstance(other, TokenizerVocabulary) and other.tokenizer.checksum == self.tokenizer.checksum

    def __str__(self) -> str:
        return f"TokenizerVocabulary({self.tokenizer.name}, vocab_size={self.tokenizer.vocab_size})"
