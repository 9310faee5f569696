"""What the post-training iterators share: a resumable cursor over epoch-shuffled examples.

Both the chat (SFT) and the preference (QRPO/DPO) iterators walk their examples in a per-epoch permutation
seeded by `[seed, epoch]`, so their whole position is `(step, epoch, position in the epoch's order)`. The
state saved with a checkpoint is that cursor plus a fingerprint of the inputs (files, tokenizer, settings),
and a restored iterator yields bitwise the batches an uninterrupted one would.
"""

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import grain
import numpy as np

from apertus_jax.files import file_sha256
from apertus_jax.tokenizers.base import Tokenizer

STATE_VERSION = 1
# The name post-training data is counted under in `consumed()` and described under in the run's provenance.
COMPONENT = "posttrain"


def rows_per_step(batch_size: Any, seq_len: int, step: int) -> int:
    """Global rows of step `step`: an int, or a `BatchSizePlan` (tokens per batch / seq_len)."""
    if hasattr(batch_size, "batch_tokens_at_step"):
        return batch_size.batch_tokens_at_step(step) // seq_len
    return int(batch_size)


def inputs_fingerprint(paths: Sequence[str], tokenizer: Tokenizer, *settings) -> str:
    """sha256 prefix of the files' contents, the tokenizer and `settings` (JSON-serializable)."""
    payload = json.dumps([[file_sha256(p) for p in paths], tokenizer.checksum, *settings], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


class EpochIterator(grain.DatasetIterator):
    """A `grain.DatasetIterator` whose state is `(step, epoch, position)` and `fingerprint`.

    Subclasses set `self.fingerprint` and `STATE_MISMATCH` (the fix named when a saved state does not
    match), advance the cursor with `order(n)` and `advance(n)` and pass each batch they yield through
    `count`, which adds its target tokens to `consumed()`.
    """

    STATE_MISMATCH = "iterator state was saved with other inputs or settings; resume with the same settings"

    def __init__(self, seed: int):
        super().__init__()
        self.seed = seed
        self.step, self.epoch, self.position = 0, 0, 0
        self.tokens = 0  # target tokens of the batches yielded so far

    def order(self, n: int) -> np.ndarray:
        """The current epoch's permutation of `n` examples."""
        return np.random.default_rng([self.seed, self.epoch]).permutation(n)

    def advance(self, n: int) -> None:
        """Moves past one of `n` examples; the epoch ends after the last."""
        self.position += 1
        if self.position == n:
            self.epoch, self.position = self.epoch + 1, 0

    def count(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Adds the target tokens of `batch` (its positions inside a sequence: `segment_ids` > 0, padding
        excluded; the trained ones and the prompts alike) to the count; returns `batch`."""
        self.tokens += int(np.count_nonzero(batch["segment_ids"]))
        return batch

    def get_state(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "fingerprint": self.fingerprint,
            "step": self.step,
            "epoch": self.epoch,
            "position": self.position,
            "tokens": self.tokens,
        }

    def consumed(self) -> dict:
        """`{"tokens": {COMPONENT: target tokens}}` of the batches yielded so far (`apertus_jax.train.batches`)."""
        return {"tokens": {COMPONENT: self.tokens}}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continues from `get_state()`.

        Raises:
          ValueError: a state of another version or of other inputs, settings, seed or shard layout.
        """
        if state.get("version") != STATE_VERSION or state.get("fingerprint") != self.fingerprint:
            raise ValueError(self.STATE_MISMATCH)
        self.step, self.epoch, self.position = int(state["step"]), int(state["epoch"]), int(state["position"])
        self.tokens = int(state.get("tokens", 0))  # states saved before the count: from 0
