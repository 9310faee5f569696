"""HuggingFace `tokenizer.json` files (loaded with the `tokenizers` library) behind `Tokenizer`.

Special ids come from the file's own special added tokens, looked up by the document-level names in the order
below (the first one present wins). Chat tokens such as `<|eot_id|>` or `<end_of_turn>` are not document
boundaries, so `tokenizer_config.json` (whose `eos_token` is often a chat token) is not consulted.
Fallbacks, for files that lack them: no BoD token -> BoD = EoD (e.g. Qwen frames documents with
`<|endoftext|>` only); no pad token -> pad = EoD (`data.masks.document_masks` then treats padding as
EoD: never a target, real EoDs stay targets); no EoD token -> ValueError. Pass the token strings explicitly to override.
"""

import os
from collections.abc import Iterable, Sequence

import tokenizers

from apertus_jax.files import file_sha256
from apertus_jax.tokenizers.base import Tokenizer

BOD_TOKENS = ("<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>", "[BOS]")
EOD_TOKENS = ("</s>", "<|end_of_text|>", "<eos>", "<|endoftext|>", "[EOS]")
PAD_TOKENS = ("<pad>", "<|pad|>", "[PAD]")


class HFTokenizer(Tokenizer):
    """A HuggingFace `tokenizer.json`.

    Args:
      path: the `tokenizer.json` file.
      bod_token, eod_token, pad_token: token strings that override the lookup described above.
      name: display name; defaults to "hf:<parent folder>/<file name>".

    Attributes:
      path: the `tokenizer.json` file (read again by `tokenizers.hf_export`).

    Raises:
      FileNotFoundError: `path` does not exist.
      ValueError: `path` is a directory (an export's folder, say: pass its tokenizer.json) or a file the
        `tokenizers` library cannot read as a tokenizer.json; no EoD token can be found; an explicit token is
        not in the vocabulary.
    """

    def __init__(
        self,
        path: str,
        bod_token: str | None = None,
        eod_token: str | None = None,
        pad_token: str | None = None,
        name: str | None = None,
    ):
        if not os.path.exists(path):
            raise FileNotFoundError(f"HF tokenizer file {path} not found; pass the path of a tokenizer.json")
        if os.path.isdir(path):
            raise ValueError(
                f"HF tokenizer {path} is a directory; pass the path of its tokenizer.json "
                f"({os.path.join(path, 'tokenizer.json')})"
            )
        self.path = path
        try:
            self._tokenizer = tokenizers.Tokenizer.from_file(path)
        except Exception as error:  # noqa: BLE001 - the Rust library raises a bare Exception
            raise ValueError(
                f"HF tokenizer {path} is not a tokenizer.json file ({error}); pass the path of a tokenizer.json"
            ) from None
        eod_id = self._find_id(path, eod_token, EOD_TOKENS)
        if eod_id is None:
            raise ValueError(
                f"HF tokenizer {path} has none of the EoD tokens {EOD_TOKENS}; pass eod_token explicitly"
            )
        bod_id = self._find_id(path, bod_token, BOD_TOKENS)
        pad_id = self._find_id(path, pad_token, PAD_TOKENS)
        parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
        super().__init__(
            name=name or f"hf:{parent}/{os.path.basename(path)}",
            vocab_size=self._tokenizer.get_vocab_size(with_added_tokens=True),
            bod_id=eod_id if bod_id is None else bod_id,
            eod_id=eod_id,
            pad_id=eod_id if pad_id is None else pad_id,
            checksum=file_sha256(path),
        )

    def _find_id(self, path: str, explicit: str | None, candidates: Sequence[str]) -> int | None:
        if explicit is not None:
            token_id = self._tokenizer.token_to_id(explicit)
            if token_id is None:
                raise ValueError(f"token {explicit!r} is not in HF tokenizer {path}")
            return token_id
        # Only special added tokens count: "<s>" can also be an ordinary BPE piece (Qwen, Gemma).
        special = {
            token.content: token_id
            for token_id, token in self._tokenizer.get_added_tokens_decoder().items()
            if token.special
        }
        return next((special[token] for token in candidates if token in special), None)

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        return self._tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)
