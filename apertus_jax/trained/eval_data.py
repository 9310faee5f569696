"""What `apertus_jax.trained.evaluate` scores for perplexity and memorization, and what it says it scores.

    heldout, unseen = heldout_documents(config, tokenizer, heldout="")   # a run's own held-out sets
    trained = trained_documents(config, tokenizer)                       # memorization: what it trained on

The held-out documents, in this order of choice:
- `--heldout=PATH` (`user_heldout`): the user's own held-out data, a shard set of `experiments.tokenize_data`
  (its manifest's tokenizer must be the run's) or a JSONL, Parquet or text file (kind by its extension) that
  the run's tokenizer encodes;
- a run on the demo corpus alone: the corpus's held-out split of the sources it trains on, in the corpus's
  order, and its UDHR translations held out whole (languages the run never saw) apart;
- any other run: the held-out sets of its own components as the in-loop evaluation asks for them
  (`apertus_jax.eval.in_loop.heldout_texts`: a component kind's own held-out split, a raw component's file
  in the run's `eval.heldout_paths`, the extra sets named there), in config order. A component without a held-out
  set is named in a warning when the run's config names extra sets (the user's held-out files); without them
  the run is refused with one line naming `--heldout` (it would be scored on another component's text alone).

The trained documents of memorization are those of the run's components, as its pipeline loads them (the demo
corpus's training split for a run on it alone). Each `Documents` says what it is (`data`), and the result and
the log repeat it.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Sequence

import numpy as np
from absl import logging

from apertus_jax.config.schema import Config
from apertus_jax.data import demo_corpus, shards
from apertus_jax.data.run_tokenizer import TokenizerMismatchError, spec_of
from apertus_jax.eval.in_loop import heldout_texts, read_texts
from apertus_jax.tokenizers.base import Tokenizer

# The fix of a run whose held-out data the command cannot find.
HELDOUT_FIX = (
    "pass --heldout=PATH: a shard set of experiments.tokenize_data or a JSONL, Parquet or text file of text "
    "the run never trained on"
)


@dataclasses.dataclass(frozen=True)
class Documents:
    """Documents to score, in order: `parts`, each a sequence of texts (encoded on use) or of int32 token
    arrays `[bod, ..., eod]` (a shard set's or a component's); `data` says what they are."""

    data: str
    parts: tuple[Sequence, ...]

    def take(
        self, tokenizer: Tokenizer, limit: int = 0, min_tokens: int = 0
    ) -> tuple[list[np.ndarray], int | None]:
        """The first `limit` documents (0: all) of at least `min_tokens` tokens as int32 `[bod, ..., eod]`
        arrays, and the UTF-8 bytes of their texts (None for token arrays, whose texts are not stored).

        Raises:
          ValueError: no document of at least `min_tokens` tokens (one line naming `data`).
        """
        documents, num_bytes, texts = [], 0, True
        for item in itertools.chain.from_iterable(self.parts):
            texts = isinstance(item, str)
            document = tokenizer.encode_document(item) if texts else np.asarray(item, np.int32)
            if len(document) < min_tokens:
                continue
            documents.append(document)
            num_bytes += len(item.encode("utf-8")) if texts else 0
            if len(documents) == limit:
                break
        if not documents:
            least = f" of at least {min_tokens} tokens" if min_tokens else ""
            raise ValueError(f"{self.data} holds no document{least} to score")
        return documents, num_bytes if texts else None


def user_heldout(path: str, tokenizer: Tokenizer) -> Documents:
    """The held-out data of `--heldout=PATH`: a shard set (a folder with `manifest.json`, written with
    `tokenizer`) or a raw JSONL, Parquet or text file.

    Raises:
      FileNotFoundError / ValueError: one line naming `--heldout`: no such path, a folder that is no shard
        set, shards of another tokenizer, a file without documents.
    """
    flag = f"--heldout={path}"
    if not os.path.exists(path):
        raise FileNotFoundError(f"{flag} does not exist; {HELDOUT_FIX}")
    try:
        if os.path.isdir(path):
            if not os.path.isfile(os.path.join(path, shards.MANIFEST)):
                raise ValueError(f"a folder without {shards.MANIFEST}, so no shard set; {HELDOUT_FIX}")
            source = shards.ShardSource(path, tokenizer)
            return Documents(f"{flag} (a shard set of {len(source):,} documents)", (source,))
        texts = read_texts(path)
    except TokenizerMismatchError as error:
        raise ValueError(
            f"{flag}: tokenized with {error.data_tokenizer}, the run trained with {error.run_tokenizer}; "
            f"re-tokenize them with experiments.tokenize_data --tokenizer={spec_of(tokenizer.name)}, or pass "
            "their text file (JSONL, Parquet or text) as --heldout"
        ) from None
    except (OSError, ValueError) as error:
        raise type(error)(f"{flag}: {error}") from None
    return Documents(f"{flag} ({len(texts):,} documents)", (texts,))


def _demo_sources(config: Config) -> list[str] | None:
    """The demo corpus's sources, in its order, of a run that trains on the demo corpus alone and names no
    held-out file; None for any other run."""
    mixed = config.data.pipeline.mixed()
    if not mixed or config.eval.heldout_paths or any(spec.kind != "demo" for spec in mixed.values()):
        return None
    chosen = set().union(*(spec.sources or demo_corpus.ASSET_FILES for spec in mixed.values()))
    return [source for source in demo_corpus.ASSET_FILES if source in chosen]


def heldout_documents(
    config: Config, tokenizer: Tokenizer, heldout: str = ""
) -> tuple[Documents, Documents | None]:
    """The held-out documents of the run `config` (module docstring) and those of languages it never trained
    on (None when it has none, or with `heldout`).

    Raises:
      ValueError: a run with a component that has no held-out set and no extra set (one line naming
        `--heldout`); as `user_heldout` and `apertus_jax.eval.in_loop.heldout_texts`.
    """
    if heldout:
        return user_heldout(heldout, tokenizer), None
    sources = _demo_sources(config)
    if sources is not None:
        texts = [d["text"] for d in demo_corpus.load_demo_documents("heldout", sources)]
        unseen = [d["text"] for d in demo_corpus.load_demo_documents("unseen_languages", sources)]
        named = f"the demo corpus's held-out split ({', '.join(sources)})"
        whole = "the demo corpus's UDHR translations held out whole (languages the run never saw)"
        return Documents(named, (texts,)), Documents(whole, (unseen,)) if unseen else None
    found = heldout_texts(config.eval, config.data.pipeline)
    kinds = config.data.pipeline.components
    named = found.named_missing(config.data.pipeline)
    extra = [
        name for name, _ in found.heldout if name not in kinds
    ]  # sets of eval.heldout_paths of their own
    if not found.heldout or (found.missing and not extra):
        raise ValueError(
            f"the run trains on {named or 'no component'} with no held-out set to score; {HELDOUT_FIX}"
        )
    if found.missing:
        logging.warning(found.not_scored(config.data.pipeline))
    heldout_set = Documents(
        "the run's held-out sets: " + ", ".join(name for name, _ in found.heldout),
        tuple(texts for _, texts in found.heldout),
    )
    unseen_set = Documents(
        "text in languages the run never trained on: " + ", ".join(name for name, _ in found.unseen),
        tuple(texts for _, texts in found.unseen),
    )
    return heldout_set, unseen_set if found.unseen else None


def trained_documents(config: Config, tokenizer: Tokenizer) -> Documents:
    """The documents the run `config` trains on (module docstring), loaded as its pipeline loads them.

    Raises:
      FileNotFoundError / ValueError: a component's files are gone or unreadable.
    """
    sources = _demo_sources(config)
    if sources is not None:
        texts = [d["text"] for d in demo_corpus.load_demo_documents("train", sources)]
        return Documents(f"the demo corpus's training split ({', '.join(sources)})", (texts,))
    mixed = config.data.pipeline.mixed()
    return Documents(
        "the run's training components: "
        + ", ".join(f"{name} ({spec.kind})" for name, spec in mixed.items()),
        tuple(spec.load(name, tokenizer).documents for name, spec in mixed.items()),
    )
