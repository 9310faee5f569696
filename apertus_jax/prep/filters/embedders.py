"""Document embedders for the classifier heads: a weights-free default and any user-supplied model.

An embedder is any object with `name: str`, `dim: int` and `__call__(texts: list[str]) -> float32 [N, dim]`.
Apertus embeds with XLM-RoBERTa (3.1.3); `CallableEmbedder` wraps such a sentence-embedding model.
`HashedCharNgramEmbedder` needs no weights: signed feature hashing of character n-grams (the hashing trick),
log-scaled counts, L2-normalized. It is deterministic across processes and machines (no Python `hash`).
"""

from collections.abc import Callable, Sequence

import numpy as np

_PRIME = np.uint64(0x100000001B3)


def _mix64(h: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: spreads the polynomial n-gram hash over all 64 bits (uint64, wraps)."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


class HashedCharNgramEmbedder:
    """Character n-gram counts hashed into `dim` signed buckets (weights-free default embedder).

    Text is lower-cased, whitespace collapsed to single spaces and padded with one space at each end, and
    cut to `max_chars` characters. Each n-gram (n in [min_n, max_n]) adds +-1 to bucket `h % dim` (sign
    from the top bit of h); features are sign(c) * log1p(|c|), then L2-normalized.

    Args:
      dim: embedding size (number of hash buckets).
      min_n, max_n: n-gram lengths in characters.
      max_chars: longer texts are cut (bounds the cost per document).
    Raises:
      ValueError: dim < 1 or not 1 <= min_n <= max_n.
    """

    def __init__(self, dim: int = 4096, min_n: int = 1, max_n: int = 4, max_chars: int = 20_000):
        if dim < 1 or not 1 <= min_n <= max_n:
            raise ValueError(f"need dim >= 1 and 1 <= min_n <= max_n, got dim={dim}, n=[{min_n}, {max_n}]")
        self.dim, self.min_n, self.max_n, self.max_chars = dim, min_n, max_n, max_chars
        self.name = f"hashed-char-ngrams(dim={dim},n={min_n}-{max_n},max_chars={max_chars})"

    def config(self) -> dict:
        """JSON-serializable settings saved with a head; `embedder_from_config` rebuilds the embedder."""
        return {
            "kind": "hashed_char_ngrams",
            "dim": self.dim,
            "min_n": self.min_n,
            "max_n": self.max_n,
            "max_chars": self.max_chars,
        }

    def _embed_one(self, text: str) -> np.ndarray:
        text = " " + " ".join(text.lower().split())[: self.max_chars] + " "
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        rolling, hashes = np.zeros_like(codes), []
        for n in range(1, self.max_n + 1):
            rolling = rolling[: len(codes) - n + 1] * _PRIME + codes[n - 1 :]
            if n >= self.min_n:
                hashes.append(_mix64(rolling + np.uint64(n)))
        h = np.concatenate(hashes)
        signs = np.where(h >> np.uint64(63), -1.0, 1.0)
        counts = np.bincount((h % np.uint64(self.dim)).astype(np.int64), weights=signs, minlength=self.dim)
        features = np.sign(counts) * np.log1p(np.abs(counts))
        norm = np.linalg.norm(features)
        return (features / norm if norm else features).astype(np.float32)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """float32 [N, dim] embeddings of `texts`."""
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            out[i] = self._embed_one(text)
        return out


class CallableEmbedder:
    """Wraps a user's sentence-embedding function `texts -> array [N, dim]` (e.g. an XLM-R encoder).

    `name` identifies the model; a head trained with one embedder refuses another name at load time.
    """

    def __init__(self, fn: Callable[[Sequence[str]], np.ndarray], dim: int, name: str):
        self.fn, self.dim, self.name = fn, dim, name

    def config(self) -> dict:
        """Name and dim saved with a head; loading checks the user's embedder against them."""
        return {"kind": "callable", "dim": self.dim, "name": self.name}

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        out = np.asarray(self.fn(list(texts)), dtype=np.float32)
        if out.shape != (len(texts), self.dim):
            raise ValueError(
                f"embedder {self.name} returned shape {out.shape}, expected {(len(texts), self.dim)}"
            )
        return out


def embedder_from_config(config: dict, embedder=None):
    """Rebuild the embedder a head was trained with; a `callable` one must be passed in as `embedder`.

    Raises:
      ValueError: a callable embedder is needed but missing or has another name/dim, or an unknown kind.
    """
    if config["kind"] == "hashed_char_ngrams":
        return HashedCharNgramEmbedder(config["dim"], config["min_n"], config["max_n"], config["max_chars"])
    if config["kind"] == "callable":
        if embedder is None or embedder.name != config["name"] or embedder.dim != config["dim"]:
            raise ValueError(
                f"this head was trained on embedder {config['name']!r} (dim {config['dim']}); "
                "pass the same embedder=CallableEmbedder(...) when loading it"
            )
        return embedder
    raise ValueError(f"unknown embedder kind {config['kind']!r}")
