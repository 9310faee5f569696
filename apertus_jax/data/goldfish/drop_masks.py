"""Goldfish loss masks (Hans et al. 2024; Apertus settings k = 50, h = 50; docs/recipe.md section 3).

A hash of the h consecutive labels ending at position i decides whether label i is dropped from the loss.
`GoldfishSpec` (the `data.pipeline.goldfish` settings) and `drop_mask` are the one interface over three
hashes: two over token ids, here (docs/goldfish.md compares them), and one over normalized words
("canonical", `apertus_jax.data.goldfish.canonical`).

- "apertus" (reproduction default, bit-compatible with the Apertus loader): for i >= h - 1, `key =
  product(window) mod 1_000_003` with int64 wrap-around and a non-negative remainder, drop if `table[key] <
  1/k`, where `table` is the 1,000,003 float32 values of `torch.Generator().manual_seed(2971215073);
  torch.rand(1_000_003)` shipped in `assets/goldfish_table.npy`. With h = 50 the wrapping product is 0 for
  ~9% of windows (many factors of two) and all of those read table[0] = 0.2337 (never dropped at k = 50),
  so the effective drop rate falls below 1/k and depends on the text. Like the Apertus loader, the window
  is cut from the packed row: the first h - 1 positions of each row are never dropped and windows cross
  document boundaries, so a passage's mask depends on where the row boundary falls.
- "mixed": content-only. The window of label i holds the h labels of i's own document ending at i; where
  the document starts less than h - 1 labels before i, the missing places are filled with a fixed
  document-start sentinel (a value no token id takes). The hash is a polynomial over splitmix64-mixed
  tokens, finalized with splitmix64; drop if the 64-bit hash is below floor(2^64 / k), i.e. exactly 1/k in
  expectation for any text. A document's mask is a function of its own tokens alone: the same at any row
  offset, across any row boundary (the packer passes the document's tokens before the row as `history`),
  after any neighbour; its first h - 1 labels are hashed (with the sentinel) and can be dropped.

Neither hash depends on the step, seed, host or batch size. The mask only ever zeroes the loss mask;
labels are unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.resources

import numpy as np

from apertus_jax.checks import check_choice, check_number
from apertus_jax.named import load_named

TABLE_SIZE = 1_000_003
TABLE_SHA256 = "6bfbcc32675eb4159a8170345aca398f10c13f1e7db65b2fa83eabd075f94589"
TOKEN_HASHES = ("apertus", "mixed")
HASHES = (*TOKEN_HASHES, "canonical")
# The word-keyed hash of the memorization-formats study, imported on first use (the trainer's import holds none).
CANONICAL_DROP_MASK = "apertus_jax.data.goldfish.canonical:canonical_drop_mask"
# The Apertus settings (docs/recipe.md section 3): drop 1 token in k = 50, hashing the h = 50 tokens up to it.
APERTUS_K = 50
APERTUS_H = 50

_MASK64 = (1 << 64) - 1
_POLY_BASE = 0x9E3779B97F4A7C15  # odd, hence invertible modulo 2^64


@functools.cache
def goldfish_table() -> np.ndarray:
    """The Apertus Goldfish table: float32 `[1_000_003]` uniform in [0, 1).

    Raises:
      ValueError: the shipped file does not match `TABLE_SHA256` (corrupted or replaced asset).
    """
    path = importlib.resources.files("apertus_jax.data") / "assets" / "goldfish_table.npy"
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != TABLE_SHA256:
        raise ValueError(
            f"{path}: sha256 {digest} != {TABLE_SHA256}; restore the file from the repository "
            "(it is torch.rand(1_000_003) with torch.Generator().manual_seed(2971215073))"
        )
    with path.open("rb") as f:
        table = np.load(f, allow_pickle=False)
    table.setflags(write=False)
    return table


def _window_products(x: np.ndarray, h: int) -> np.ndarray:
    """Wrapping int64 products of all windows of width h, `[..., T - h + 1]` (element j covers x[j:j+h]).

    Log-depth doubling: products of width 2w are products of two adjacent width-w windows, and the width-h
    product multiplies the power-of-two widths of h's binary digits at consecutive offsets.
    """
    num_windows = x.shape[-1] - h + 1
    result = None
    offset, width, power, remaining = 0, 1, x, h
    while True:
        if remaining & 1:
            piece = power[..., offset : offset + num_windows]
            result = piece if result is None else result * piece
            offset += width
        remaining >>= 1
        if not remaining:
            return result
        power = power[..., :-width] * power[..., width:]
        width *= 2


def _splitmix64(z: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer on uint64 arrays (wrapping arithmetic)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


# The mixed value of the document-start sentinel: splitmix64(2^64 - 1), a value no token id (< 2^63) maps to.
_SENTINEL_MIX = _splitmix64(np.array([_MASK64], np.uint64))[0]


@functools.lru_cache(maxsize=16)
def _base_powers(length: int) -> tuple[np.ndarray, np.ndarray]:
    """`(B^i, B^-i)` modulo 2^64 for i in [0, length), uint64."""
    inverse = _POLY_BASE
    for _ in range(6):  # Newton iteration doubles the correct low bits: 3 -> 96.
        inverse = inverse * (2 - _POLY_BASE * inverse) & _MASK64
    one = np.ones(1, np.uint64)
    powers = np.concatenate([one, np.cumprod(np.full(length - 1, _POLY_BASE, np.uint64))])
    inverse_powers = np.concatenate([one, np.cumprod(np.full(length - 1, inverse, np.uint64))])
    return powers, inverse_powers


def _document_window_hashes(
    labels: np.ndarray, h: int, eod_id: int | None, history: np.ndarray
) -> np.ndarray:
    """The "mixed" hash of every label's document-local window, uint64 `[..., T]`.

    `ext = history ++ labels`; a document starts at the first non-sentinel place and after every EoD. For
    the window ending at q with document start s, the places n in [max(s, q - h + 1), q] contribute
    `mix(ext[n]) * B^(q - n)` and the `n_pad` places before s contribute `mix(SENTINEL) * B^j` for j in
    [h - n_pad, h), all modulo 2^64. The real part comes from prefix sums of mix(ext[m]) * B^-m: the window
    sum times B^q does not depend on the window's offset, so neither does the hash.
    """
    ext = np.concatenate([history.astype(np.int64), labels.astype(np.int64)], axis=-1)
    length = ext.shape[-1]
    valid = ext >= 0
    starts = valid.copy()
    starts[..., 1:] &= ~valid[..., :-1] | (False if eod_id is None else ext[..., :-1] == eod_id)
    index = np.broadcast_to(np.arange(length), ext.shape)
    document_start = np.maximum.accumulate(np.where(starts, index, 0), axis=-1)
    powers, inverse_powers = _base_powers(length)
    mixed = np.where(valid, _splitmix64(ext.astype(np.uint64)), np.uint64(0))
    prefix = np.cumsum(mixed * inverse_powers, axis=-1, dtype=np.uint64)
    prefix = np.concatenate([np.zeros(prefix.shape[:-1] + (1,), np.uint64), prefix], axis=-1)
    q = np.arange(h - 1, length)
    low = np.maximum(document_start[..., h - 1 :], q - h + 1)
    real = (prefix[..., q + 1] - np.take_along_axis(prefix, low, axis=-1)) * powers[q]
    # geometric[n] = sum_{j < n} B^j; the sentinel fills the window's n_pad oldest places.
    geometric = np.concatenate([np.zeros(1, np.uint64), np.cumsum(powers[:h], dtype=np.uint64)])
    n_pad = low - (q - h + 1)
    padding = _SENTINEL_MIX * (geometric[h] - geometric[h - n_pad])
    return _splitmix64(real + padding)


def goldfish_drop_mask(
    labels: np.ndarray,
    k: int = APERTUS_K,
    h: int = APERTUS_H,
    hash: str = "apertus",  # noqa: A002 (config name)
    *,
    eod_id: int | None = None,
    history: np.ndarray | None = None,
) -> np.ndarray:
    """Which labels the Goldfish rule drops from the loss (True = dropped).

    Args:
      labels: integer array `[..., T]` of target token ids (each row one packed training sample).
      k: drop rate 1/k; k = 0 disables Goldfish (nothing dropped).
      h: window width in tokens (context that decides the drop).
      hash: "apertus" (bit-compatible with the Apertus loader) or "mixed" (content-only, exact 1/k rate).
      eod_id: "mixed" only: the end-of-document id; the label after an EoD label starts a new document.
        None treats the row as one document.
      history: "mixed" only: integer `[..., h - 1]`, the h - 1 tokens of the first label's document right
        before `labels[..., 0]`, with -1 for places before that document's start; None (all -1) means the
        row starts a document. The packer provides it (`PackedRows.history`).

    Returns:
      bool array `[..., T]`; with "apertus" the first h - 1 positions of every row are False.

    Raises:
      ValueError: k < 0, h < 1, an unknown hash, non-integer labels or a history of the wrong shape.
    """
    labels = np.asarray(labels)
    if k < 0 or h < 1:
        raise ValueError(f"goldfish needs k >= 0 and h >= 1, got k={k}, h={h}")
    if hash not in TOKEN_HASHES:
        raise ValueError(f"goldfish hash {hash!r} is not one of {TOKEN_HASHES}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"goldfish labels must be integer token ids, got dtype {labels.dtype}")
    dropped = np.zeros(labels.shape, dtype=bool)
    if k == 0:
        return dropped
    if hash == "apertus":
        if labels.shape[-1] >= h:
            keys = _window_products(labels.astype(np.int64), h) % TABLE_SIZE
            # torch compares the float32 table with 1/k in float32; do the same.
            dropped[..., h - 1 :] = goldfish_table()[keys] < np.float32(1.0 / k)
        return dropped
    if history is None:
        history = np.full(labels.shape[:-1] + (h - 1,), -1, np.int64)
    history = np.asarray(history)
    if history.shape != labels.shape[:-1] + (h - 1,) or not np.issubdtype(history.dtype, np.integer):
        raise ValueError(
            f"goldfish history must be integer {labels.shape[:-1] + (h - 1,)} (h - 1 tokens per row), "
            f"got {history.dtype} {history.shape}"
        )
    return _document_window_hashes(labels, h, eod_id, history) < np.uint64(_MASK64 // k)


@dataclasses.dataclass(frozen=True)
class GoldfishSpec:
    """The `data.pipeline.goldfish` settings.

    Attributes:
      k: drop rate 1/k; 0 disables Goldfish.
      h: context width: tokens for the token hashes, normalized words for "canonical".
      hash: "apertus" (bit-compatible with the Apertus loader), "mixed" (content-only token hash) or
        "canonical" (normalized words; `apertus_jax.data.goldfish.canonical`).

    Raises:
      ValueError: in `__post_init__`, one line naming the field (`k=...`, `h=...`, `hash=...`).
    """

    k: int = APERTUS_K
    h: int = APERTUS_H
    hash: str = "apertus"

    def __post_init__(self):
        check_number("k", self.k, low=0, integer=True)
        check_number("h", self.h, low=1, integer=True)
        check_choice("hash", self.hash, HASHES)

    def drop_mask(self, labels: np.ndarray, tokenizer, history: np.ndarray | None = None) -> np.ndarray:
        """Which labels these settings drop from the loss (True = dropped): the one dispatcher over the hashes.

        Args:
          labels: integer `[..., T]` target ids of packed rows.
          tokenizer: the ids' tokenizer (`eod_id` for "mixed", the id -> text mapping for "canonical").
          history: "mixed" only, as `goldfish_drop_mask`'s (`PackedRows.history`).

        Returns:
          bool `[..., T]`, all False when k = 0.
        """
        if self.hash == "canonical":
            return load_named(CANONICAL_DROP_MASK)(labels, tokenizer, self.k, self.h)
        return goldfish_drop_mask(labels, self.k, self.h, self.hash, eod_id=tokenizer.eod_id, history=history)


def dropped_fraction(batch: dict[str, np.ndarray], eod_id: int) -> float:
    """Fraction of a batch's loss positions zeroed by Goldfish: positions that are neither padding nor an EoD
    input (the only other rules that zero the loss mask, docs/recipe.md 2) and still have loss_mask 0."""
    eligible = (batch["segment_ids"] > 0) & (batch["tokens"] != eod_id)
    return float(np.sum(eligible & (batch["loss_mask"] == 0)) / max(np.sum(eligible), 1))
