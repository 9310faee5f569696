"""Goldfish loss masks (Hans et al. 2024; Apertus settings k = 50, h = 50; docs/recipe.md section 3).

For every window of h consecutive labels ending at position i (i >= h - 1) a hash of the window decides
whether label i is dropped from the loss. Two hashes share one interface:

- "apertus" (reproduction default, bit-compatible with the Apertus loader): `key = product(window) mod
  1_000_003` with int64 wrap-around and a non-negative remainder, drop if `table[key] < 1/k`, where `table`
  is the 1,000,003 float32 values of `torch.Generator().manual_seed(2971215073); torch.rand(1_000_003)`
  shipped in `assets/goldfish_table.npy`. With h = 50 the wrapping product is 0 for ~9% of windows (many
  factors of two) and all of those read table[0] = 0.2337 (never dropped at k = 50), so the effective drop
  rate falls below 1/k and depends on the text.
- "mixed": a polynomial hash over splitmix64-mixed tokens, finalized with splitmix64; drop if the 64-bit
  hash is below floor(2^64 / k), i.e. exactly 1/k in expectation for any text.

Both are pure functions of the window content: never of the row, step, seed, host or batch size. The
first h - 1 positions of each row are never dropped; windows cross document boundaries. The mask only
ever zeroes the loss mask; labels are unchanged.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources

import numpy as np

TABLE_SIZE = 1_000_003
TABLE_SHA256 = "6bfbcc32675eb4159a8170345aca398f10c13f1e7db65b2fa83eabd075f94589"
HASHES = ("apertus", "mixed")
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


def _mixed_window_hashes(x: np.ndarray, h: int) -> np.ndarray:
    """splitmix64(sum_j mix(x[i - j]) * B^j) for windows ending at i >= h - 1, uint64 `[..., T - h + 1]`.

    Uses prefix sums of mix(x[m]) * B^-m: the window sum times B^i is independent of the window's offset.
    """
    length = x.shape[-1]
    powers, inverse_powers = _base_powers(length)
    prefix = np.cumsum(_splitmix64(x.astype(np.uint64)) * inverse_powers, axis=-1, dtype=np.uint64)
    zero = np.zeros(prefix.shape[:-1] + (1,), np.uint64)
    prefix = np.concatenate([zero, prefix], axis=-1)
    window_sums = (prefix[..., h:] - prefix[..., :-h]) * powers[h - 1 :]
    return _splitmix64(window_sums)


def goldfish_drop_mask(
    labels: np.ndarray,
    k: int = APERTUS_K,
    h: int = APERTUS_H,
    hash: str = "apertus",  # noqa: A002 (config name)
) -> np.ndarray:
    """Which labels the Goldfish rule drops from the loss (True = dropped).

    Args:
      labels: integer array `[..., T]` of target token ids (each row one packed training sample).
      k: drop rate 1/k; k = 0 disables Goldfish (nothing dropped).
      h: window width in tokens (context that decides the drop).
      hash: "apertus" (bit-compatible with the Apertus loader) or "mixed" (exact 1/k rate).

    Returns:
      bool array `[..., T]`; the first h - 1 positions of every row are False.

    Raises:
      ValueError: k < 0, h < 1, an unknown hash, or non-integer labels.
    """
    labels = np.asarray(labels)
    if k < 0 or h < 1:
        raise ValueError(f"goldfish needs k >= 0 and h >= 1, got k={k}, h={h}")
    if hash not in HASHES:
        raise ValueError(f"goldfish hash {hash!r} is not one of {HASHES}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"goldfish labels must be integer token ids, got dtype {labels.dtype}")
    dropped = np.zeros(labels.shape, dtype=bool)
    if k == 0 or labels.shape[-1] < h:
        return dropped
    if hash == "apertus":
        keys = _window_products(labels.astype(np.int64), h) % TABLE_SIZE
        # torch compares the float32 table with 1/k in float32; do the same.
        dropped[..., h - 1 :] = goldfish_table()[keys] < np.float32(1.0 / k)
    else:
        threshold = np.uint64(_MASK64 // k)
        dropped[..., h - 1 :] = _mixed_window_hashes(labels, h) < threshold
    return dropped
