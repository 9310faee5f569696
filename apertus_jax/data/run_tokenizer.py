"""The run's tokenizer from the `data` section, and the demo BPE it defaults to.

The demo default (`data.tokenizer = "demo"`) is a SentencePiece BPE of `data.demo_tokenizer_vocab` ids
trained on the demo corpus's train split (a few seconds) and cached under $APERTUS_JAX_CACHE (default
~/.cache/apertus_jax), keyed by the training texts and the vocabulary size. A small vocabulary keeps the
tiny CPU model's embedding and logits cheap (tekken's 131,072 ids would dominate it), so its loss falls
clearly within minutes.

Data tokenized before the run (shard sets, Megatron datasets) records its tokenizer; `check_tokenized_with`
refuses another than the run's in one line that names both fixes: the run's `data.tokenizer` set to the
data's, or the data re-tokenized with the run's.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import time
from collections.abc import Sequence

from absl import logging

from apertus_jax.cache import cache_dir
from apertus_jax.data import demo_corpus
from apertus_jax.tokenizers import load_tokenizer
from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.tokenizers.load import DEMO
from apertus_jax.tokenizers.train import BPEConfig, train_sentencepiece

# The file name of a demo BPE: its vocabulary size and the key of its training texts (`demo_tokenizer_path`).
_DEMO_FILE = "demo_bpe{vocab_size}_cov98_{key}.model"
_DEMO_NAME = re.compile(
    "sentencepiece:" + _DEMO_FILE.format(vocab_size=r"\d+", key="[0-9a-f]{12}").replace(".", r"\.")
)


def demo_tokenizer_path(vocab_size: int, texts: Sequence[str]) -> str:
    """Cache path of the demo BPE with `vocab_size` ids trained on `texts` (the demo train split).

    Keyed on the training texts themselves, not on the asset files: a change of the split rule with the same
    assets yields another tokenizer, so a cache written before the change is not reused.
    """
    return os.path.join(cache_dir(), _DEMO_FILE.format(vocab_size=vocab_size, key=_texts_key(tuple(texts))))


@functools.lru_cache(maxsize=1)
def _texts_key(texts: tuple[str, ...]) -> str:
    """12 hex digits of the sha256 of `texts`, remembered for the last texts: a process asks again for the
    tokenizer of every run it trains."""
    return hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()[:12]


@functools.cache
def _train_texts() -> tuple[str, ...]:
    """The texts of the demo corpus's train split, read once per process."""
    return tuple(d["text"] for d in demo_corpus.load_demo_documents("train"))


def demo_tokenizer(vocab_size: int) -> Tokenizer:
    """The demo corpus's SentencePiece BPE with `vocab_size` ids, trained once and cached (atomic write)."""
    texts = _train_texts()
    path = demo_tokenizer_path(vocab_size, texts)
    if not os.path.exists(path):
        logging.info(
            "tokenizer: training the demo SentencePiece BPE (%d ids) on the demo corpus, once; cached as %s",
            vocab_size,
            path,
        )
        start = time.time()
        # 0.98 coverage: rare characters of the 440 UDHR languages fall back to bytes instead of taking most of
        # a small vocabulary (at 0.9995, 3,371 characters need their own id; at 0.995, 1,843).
        train_sentencepiece(texts, path, BPEConfig(vocab_size=vocab_size, character_coverage=0.98))
        logging.info("tokenizer: trained in %.1f s", time.time() - start)
    else:
        logging.info("tokenizer: the demo SentencePiece BPE (%d ids) from %s", vocab_size, path)
    return load_tokenizer(f"sentencepiece:{path}")


def run_tokenizer(spec: str, demo_vocab: int) -> Tokenizer:
    """The tokenizer of `data.tokenizer`: "demo" (the demo BPE of `demo_vocab` ids) or a `load_tokenizer`
    spec ("tekken", "sentencepiece:PATH", "hf:PATH").

    Raises:
      FileNotFoundError: the tokenizer file does not exist. ValueError: an unknown spec.
    """
    if spec == "demo":
        return demo_tokenizer(demo_vocab)
    logging.info("tokenizer: loading %s", spec)
    return load_tokenizer(spec)


def spec_of(name: str) -> str:
    """The `data.tokenizer` spec of the tokenizer named `name` (`Tokenizer.name`, as a shard manifest records
    it): "demo" for the demo BPE, "KIND:.../FILE" for one read from a file (its name keeps only the file's
    name), else `name` itself ("tekken")."""
    if _DEMO_NAME.fullmatch(name):
        return DEMO
    kind, _, file = name.partition(":")
    return f"{kind}:.../{file}" if file else name


class TokenizerMismatchError(ValueError):
    """Data tokenized with another tokenizer than the run's (their sha256s differ).

    Attributes:
      where: the data as the user named it (a shard folder, a Megatron prefix).
      written: that record's tokenizer (`name`, `checksum`: sha256 hex).
      tokenizer: the run's tokenizer.
    """

    def __init__(self, where: str, written: dict, tokenizer: Tokenizer):
        self.where, self.written, self.tokenizer = where, written, tokenizer
        super().__init__(
            f"{where}: tokenized with {self.data_tokenizer}, the run with {self.run_tokenizer}; train with "
            f"--config.data.tokenizer={spec_of(written['name'])}, or re-tokenize with experiments.tokenize_data "
            f"--tokenizer={spec_of(tokenizer.name)}"
        )

    @property
    def data_tokenizer(self) -> str:
        """The data's tokenizer as the message names it: its name and the first 12 hex digits of its sha256."""
        return f"{self.written['name']} (sha256 {self.written['checksum'][:12]})"

    @property
    def run_tokenizer(self) -> str:
        """The run's tokenizer as the message names it (as `data_tokenizer`)."""
        return f"{self.tokenizer.name} (sha256 {self.tokenizer.checksum[:12]})"


def check_tokenized_with(where: str, written: dict, tokenizer: Tokenizer) -> None:
    """Checks that the data `where` (a shard folder, a Megatron prefix), whose tokenizer record (`name`,
    `checksum`) is `written`, was tokenized with `tokenizer` (the same sha256).

    Raises:
      TokenizerMismatchError: another tokenizer; one line naming both and both fixes.
    """
    if written["checksum"] != tokenizer.checksum:
        raise TokenizerMismatchError(where, written, tokenizer)
