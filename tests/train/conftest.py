"""Fixtures of the trainer tests: batches of real text, the real pipeline on demo text (the tiny model:
tests/conftest.py)."""

import numpy as np
import pytest

TEXT = (
    "Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft und Gewissen "
    "begabt und sollen einander im Geist der Brüderlichkeit begegnen. All human beings are born free and "
    "equal in dignity and rights. They are endowed with reason and conscience and should act towards one "
    "another in a spirit of brotherhood. Tous les êtres humains naissent libres et égaux en dignité et en "
    "droits. Ils sont doués de raison et de conscience et doivent agir les uns envers les autres dans un "
    "esprit de fraternité. "
)


def _text_batch(rows: int, length: int, offset: int = 0) -> dict[str, np.ndarray]:
    """A [rows, length] batch of UTF-8 bytes of UDHR article 1 (de/en/fr), one document per row."""
    data = np.frombuffer((TEXT * 8).encode(), np.uint8).astype(np.int32)
    starts = offset + np.arange(rows) * 37
    window = np.stack([data[s : s + length + 1] for s in starts])
    return {
        "tokens": window[:, :-1],
        "targets": window[:, 1:],
        "positions": np.broadcast_to(np.arange(length, dtype=np.int32), (rows, length)).copy(),
        "segment_ids": np.ones((rows, length), np.int32),
        "loss_mask": np.ones((rows, length), np.int32),
    }


def _demo_iterator(seq_len: int = 32, rows: int = 8):
    """The real data pipeline over the UDHR part of the demo corpus with the 1,024-id demo BPE."""
    from apertus_jax.data.config import parse_pipeline
    from apertus_jax.data.pipeline import TrainIterator
    from apertus_jax.data.run_tokenizer import demo_tokenizer

    return TrainIterator(
        parse_pipeline({"components": {"demo": {"kind": "demo", "sources": ["udhr"]}}}),
        demo_tokenizer(1024),
        seq_len=seq_len,
        batch_size=rows,
        process_index=0,
        process_count=1,
        seed=0,
    )


@pytest.fixture(scope="session")
def text_batch():
    return _text_batch


@pytest.fixture(scope="session")
def demo_iterator():
    return _demo_iterator
