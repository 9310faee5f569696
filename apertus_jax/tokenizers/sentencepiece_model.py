"""SentencePiece models (e.g. the per-subset BPE tokenizers of the Boldt study) behind `Tokenizer`.

Special ids come from the model itself: BoD = its `bos_id`, EoD = its `eos_id`, pad = its `pad_id`.
Models trained by `apertus_jax.tokenizers.train` use the tekken layout: unk 0, BoD 1, EoD 2, pad 3.
Fallback for foreign models without a pad piece: pad = EoD (`data.masks.document_masks` then treats
padding as EoD: never a target, real EoDs stay targets). A model without BoD or EoD is rejected.
"""

import os
from collections.abc import Iterable, Sequence

import sentencepiece as spm

from apertus_jax.files import file_sha256
from apertus_jax.tokenizers.base import Tokenizer


class SentencePieceTokenizer(Tokenizer):
    """A `.model` file loaded with the `sentencepiece` library.

    Args:
      path: the SentencePiece `.model` file.
      num_threads: threads of `encode_batch`.

    Attributes:
      path: the `.model` file (read again by `tokenizers.hf_export`).

    Raises:
      FileNotFoundError: `path` does not exist.
      ValueError: `path` is not a SentencePiece model (e.g. a JSONL file), or the model has no BoD (bos) or
        EoD (eos) piece.
    """

    def __init__(self, path: str, num_threads: int = 2):
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"SentencePiece model {path} not found; train one with "
                "`python -m experiments.train_tokenizer`"
            )
        self.path = path
        try:
            self._processor = spm.SentencePieceProcessor(model_file=path)
        except RuntimeError:  # sentencepiece: "could not parse ModelProto", or a directory
            raise ValueError(
                f"{path} is not a SentencePiece model file; pass a .model file as sentencepiece:PATH, or train "
                "one with `python -m experiments.train_tokenizer`"
            ) from None
        bod_id, eod_id, pad_id = (
            self._processor.bos_id(),
            self._processor.eos_id(),
            self._processor.pad_id(),
        )
        if bod_id < 0 or eod_id < 0:
            raise ValueError(
                f"SentencePiece model {path} has no bos/eos piece (bos_id={bod_id}, "
                f"eos_id={eod_id}); retrain it with bos_id and eos_id set"
            )
        super().__init__(
            name=f"sentencepiece:{os.path.basename(path)}",
            vocab_size=self._processor.get_piece_size(),
            bod_id=bod_id,
            eod_id=eod_id,
            pad_id=pad_id if pad_id >= 0 else eod_id,
            checksum=file_sha256(path),
        )
        self._num_threads = num_threads

    def encode(self, text: str) -> list[int]:
        return self._processor.encode(text, out_type=int)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self._processor.encode(list(texts), out_type=int, num_threads=self._num_threads)

    def decode(self, ids: Iterable[int]) -> str:
        return self._processor.decode([int(i) for i in ids])

    def byte_piece_id(self, value: int) -> int | None:
        """The id of the byte-fallback piece `<0xNN>` of byte `value` (0..255), None if the model has none."""
        piece_id = self._processor.piece_to_id(f"<0x{value:02X}>")
        return piece_id if self._processor.is_byte(piece_id) else None
