"""The Apertus tokenizer: Mistral-Nemo "tekken" with the Apertus special-token layout.

Source: `mistral-common==1.13.1`, file `mistral_common/data/tekken_240718.json` (docs/recipe.md section 2,
docs/data.md). 131,072 ids: ids 0..999 are special (0 `<unk>`, 1 BoD `<s>`, 2 EoD `</s>`, 3 pad in the
Apertus layout), ids 1000.. are the first 130,072 BPE ranks shifted by +1000.

We build the `tiktoken` encoding from the file's pre-tokenization pattern and ranks directly instead of
going through `mistral_common`'s `Tekkenizer`: both run the same tiktoken core (identical ids, checked in
tests/tokenizers/test_tekken.py), but this loads ~3x faster and exposes tiktoken's threaded batch encoder.
"""

import base64
import functools
import json
import os
from collections.abc import Iterable, Sequence

import mistral_common
import numpy as np
import tiktoken

from apertus_jax.files import file_sha256
from apertus_jax.tokenizers.base import Tokenizer

TEKKEN_SHA256 = "eccd1665d2e477697c33cb7f0daa6f6dfefc57a0a6bceb66d4be52952f827516"
VOCAB_SIZE = 131_072
NUM_SPECIAL = 1_000
BOD_ID, EOD_ID, PAD_ID = 1, 2, 3


def default_tekken_path() -> str:
    """Path of `tekken_240718.json` inside the installed `mistral_common` package."""
    return os.path.join(os.path.dirname(mistral_common.__file__), "data", "tekken_240718.json")


@functools.lru_cache(maxsize=1)
def _encoding(path: str, checksum: str) -> tiktoken.Encoding:
    """tiktoken's encoding of the tekken file at `path` (whose sha256 is `checksum`), built once per process
    and shared by its tokenizers (it keeps no state between calls): parsing the 131,072 ranks is most of the
    time a tokenizer takes to load."""
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    ranks = {
        base64.b64decode(entry["token_bytes"]): entry["rank"]
        for entry in config["vocab"][: VOCAB_SIZE - NUM_SPECIAL]
    }
    return tiktoken.Encoding(
        name="tekken", pat_str=config["config"]["pattern"], mergeable_ranks=ranks, special_tokens={}
    )


class TekkenTokenizer(Tokenizer):
    """Mistral-Nemo tekken, 131,072 ids, BoD 1, EoD 2, pad 3.

    Args:
      path: the tekken json; defaults to the one shipped with `mistral-common`.
      num_threads: threads of `encode_batch`.

    Attributes:
      path: the tekken json (read again by `tokenizers.hf_export`).

    Raises:
      FileNotFoundError: `path` does not exist.
      ValueError: the file's sha256 is not the pinned tekken_240718.json one.
    """

    def __init__(self, path: str | None = None, num_threads: int = 2):
        path = path or default_tekken_path()
        if not os.path.exists(path):
            raise FileNotFoundError(f"tekken file {path} not found; install mistral-common==1.13.1")
        checksum = file_sha256(path)
        if checksum != TEKKEN_SHA256:
            raise ValueError(
                f"tekken file {path} has sha256 {checksum}, expected {TEKKEN_SHA256} "
                "(tekken_240718.json from mistral-common==1.13.1)"
            )
        super().__init__(
            name="tekken",
            vocab_size=VOCAB_SIZE,
            bod_id=BOD_ID,
            eod_id=EOD_ID,
            pad_id=PAD_ID,
            checksum=checksum,
        )
        self.path = path
        self._encoding = _encoding(path, checksum)
        self._num_threads = num_threads

    def encode(self, text: str) -> list[int]:
        return [rank + NUM_SPECIAL for rank in self._encoding.encode_ordinary(text)]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        batch = self._encoding.encode_ordinary_batch(list(texts), num_threads=self._num_threads)
        return [[rank + NUM_SPECIAL for rank in ranks] for ranks in batch]

    def decode(self, ids: Iterable[int]) -> str:
        ids = np.asarray(list(ids), dtype=np.int64)
        return self._encoding.decode((ids[ids >= NUM_SPECIAL] - NUM_SPECIAL).tolist())
