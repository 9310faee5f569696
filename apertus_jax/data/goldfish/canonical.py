"""The "canonical" Goldfish hash: drop decisions keyed on normalized words, so format variants drop alike.

The Apertus report (section 5.4.2) found that Goldfish fails on canonical texts that occur in several slightly
different formats: the token hashes ("apertus", "mixed"; `apertus_jax.data.goldfish.drop_masks`) see other tokens after
a changed line break, a doubled space or a capital letter, so every copy drops other words and together they
teach the whole passage. This hash keys the decision for a token on the text before it in a normalized form:

- the text of each token (`token_texts`) is NFKC-normalized and case-folded (`str.casefold`);
- a *word* is a maximal run of letters, digits and combining marks (`str.isalnum` or Unicode category M*);
  every other character (spaces, line breaks, punctuation) only separates words;
- words enter the key as their `word_skeleton` (ASCII vowels removed, u/v and i/j folded, doubled letters
  collapsed), so the spelling variants of near-duplicate editions ("minde" / "mind", "vs" / "us") agree;
- the key of a token that ends inside a word is `(the h - 1 words before it, the word's letters up to the
  token's end)`; the key of a token that ends outside a word (spaces, punctuation) is `(the last h words,
  separator)`. Here h counts WORDS, not tokens (about 1.3 tokens per English word with tekken);
- the token is dropped if `blake2b-64(key) < floor(2^64 / k)`: exactly 1/k in expectation (`hashlib`,
  stable across processes and hosts).

So "thee,\\nShall" and "Thee  shall" give every token that ends at the same normalized position the same
decision, whatever the tokenization; a word that is tokenized differently keeps the decision of its last
token. Document-start aware: BoD, EoD and padding reset the context (never dropped themselves), and a key is
only formed from a complete context: h words, or fewer when the context starts at a BoD in the same row. A
row that starts inside a document therefore drops nothing until h words have passed (as the token hashes
drop nothing in the first h - 1 positions of a row). Per-token normalization treats a combining sequence
split over two tokens as a word boundary only if NFKC changes across the split (rare).
"""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from collections.abc import Sequence

import numpy as np

_MASK64 = (1 << 64) - 1
_SEPARATOR = "\x1e"  # never part of a word (a control character): marks "ends outside a word"
_JOIN = "\x1f"
_VOWELS = frozenset("aeiouywjv")


def normalize_text(text: str) -> str:
    """NFKC, then case folding: the normal form every word is compared in ("Ǆ" -> "dž", "ﬁ" -> "fi")."""
    return unicodedata.normalize("NFKC", text).casefold()


def is_word_char(char: str) -> bool:
    """Letters, digits and combining marks (Devanagari vowel signs, accents) build words."""
    return char.isalnum() or unicodedata.category(char).startswith("M")


def word_skeleton(word: str) -> str:
    """The spelling-tolerant form of a normalized word that keys the hash: ASCII vowels and the letters that
    stood for them in older spelling (a, e, i, o, u, y, w, and j, v) are removed and doubled letters
    collapsed, other characters kept: "minde" and "mind" -> "mnd", "haue" and "have" -> "h", "vs" and "us" ->
    "s", "naturall" -> "ntrl". Words of other scripts are unchanged ("सभी", "人人")."""
    out: list[str] = []
    for char in word:
        if char in _VOWELS or (out and out[-1] == char):
            continue
        out.append(char)
    return "".join(out)


def normalized_words(text: str) -> list[str]:
    """The words of `text` in normal form, as the canonical hash sees them: `"To be,--that\\nIS"` ->
    `["to", "be", "that", "is"]`."""
    words, current = [], []
    for char in normalize_text(text):
        if is_word_char(char):
            current.append(char)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    return words


@functools.lru_cache(maxsize=4)
def _token_texts(tokenizer_key: tuple, tokenizer) -> tuple[str, ...]:
    del tokenizer_key  # the cache key; the tokenizer object itself is not hashed by content
    anchor = tokenizer.encode("a")
    base = tokenizer.decode(anchor)
    specials = {tokenizer.bod_id, tokenizer.eod_id, tokenizer.pad_id}
    texts = []
    for token in range(tokenizer.vocab_size):
        if token in specials:
            texts.append("")
            continue
        # Decoding after an anchor keeps a leading space that SentencePiece strips at the start of a text.
        decoded = tokenizer.decode([*anchor, token])
        texts.append(decoded[len(base) :] if decoded.startswith(base) else tokenizer.decode([token]))
    return tuple(texts)


def token_texts(tokenizer) -> tuple[str, ...]:
    """The text of every id of `tokenizer` (`[vocab_size]` strings; BoD/EoD/pad -> ""), cached per tokenizer.

    Each id is decoded after a fixed anchor token, so the leading space of a SentencePiece piece is kept. An
    id that stands for part of a multi-byte character decodes to U+FFFD (a separator here): text that needs
    byte fallback loses the exact word identity at those characters, not the rest.
    """
    return _token_texts((tokenizer.name, tokenizer.checksum, tokenizer.vocab_size), tokenizer)


def _walk(
    ids: Sequence[int], texts: Sequence[str], special_ids: frozenset, h: int
) -> tuple[list[str | None], list[list[int]], list[str]]:
    """Per token its key (None: a special token, or no complete context yet) and the indices of the words
    it adds letters to; and the words of the whole sequence (indices count from its start)."""
    words: list[str] = []
    skeletons: list[str] = []  # word_skeleton of each word: what the keys are made of
    current: list[str] = []
    start = 0  # words before this index belong to an earlier document
    at_document_start = False
    keys: list[str | None] = []
    touched_all: list[list[int]] = []
    for token in ids:
        token = int(token)
        touched: list[int] = []
        touched_all.append(touched)
        if token in special_ids:
            if current:
                words.append("".join(current))
                skeletons.append(word_skeleton(words[-1]))
                current = []
            start, at_document_start = len(words), True
            keys.append(None)
            continue
        for char in normalize_text(texts[token]):
            if is_word_char(char):
                if not touched or touched[-1] != len(words):
                    touched.append(len(words))
                current.append(char)
            elif current:
                words.append("".join(current))
                skeletons.append(word_skeleton(words[-1]))
                current = []
        width = h - 1 if current else h  # context words before the current (partial) word or separator
        context = skeletons[max(start, len(words) - width) :] if width else []
        complete = len(words) - start >= width or at_document_start
        key = _JOIN.join([*context, word_skeleton("".join(current)) if current else _SEPARATOR])
        keys.append(key if complete else None)
    if current:
        words.append("".join(current))
    return keys, touched_all, words


def _hash64(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")


def canonical_drop_mask(labels: np.ndarray, tokenizer, k: int, h: int) -> np.ndarray:
    """Which labels the canonical hash drops from the loss (True = dropped); see the module docstring.

    Args:
      labels: integer array `[..., T]` of target token ids (each row one packed training sample).
      tokenizer: the tokenizer of the ids (its id -> text mapping and BoD/EoD/pad ids).
      k: drop rate 1/k; k = 0 disables Goldfish (nothing dropped).
      h: context width in normalized WORDS.

    Returns:
      bool array `[..., T]`. Cost: a Python pass over the tokens and their context words (measured: docs/memorization.md).

    Raises:
      ValueError: k < 0, h < 1, non-integer labels or an id outside the tokenizer's vocabulary.
    """
    labels = np.asarray(labels)
    if k < 0 or h < 1:
        raise ValueError(f"goldfish needs k >= 0 and h >= 1, got k={k}, h={h}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"goldfish labels must be integer token ids, got dtype {labels.dtype}")
    dropped = np.zeros(labels.shape, dtype=bool)
    if k == 0 or labels.size == 0:
        return dropped
    if labels.min() < 0 or labels.max() >= tokenizer.vocab_size:
        raise ValueError(f"goldfish labels must lie in [0, {tokenizer.vocab_size}) (the tokenizer's ids)")
    texts = token_texts(tokenizer)
    specials = frozenset({tokenizer.bod_id, tokenizer.eod_id, tokenizer.pad_id})
    threshold = _MASK64 // k
    rows, flat = labels.reshape(-1, labels.shape[-1]), dropped.reshape(-1, labels.shape[-1])
    for row, out in zip(rows, flat):
        for position, key in enumerate(_walk(row, texts, specials, h)[0]):
            out[position] = key is not None and _hash64(key) < threshold
    return dropped


def token_words(ids: Sequence[int], tokenizer) -> tuple[list[str], list[list[int]]]:
    """The normalized words of a token sequence and, per token, the indices of the words it adds letters
    to (a token may touch none, e.g. a space or a comma, or several, e.g. " a,b").

    Returns:
      `(words, touched)`: `words` equal `normalized_words(tokenizer.decode(ids))` up to byte fallback;
      `touched` has one list per token.
    """
    specials = frozenset({tokenizer.bod_id, tokenizer.eod_id, tokenizer.pad_id})
    _, touched, words = _walk(ids, token_texts(tokenizer), specials, 1)
    return words, touched
