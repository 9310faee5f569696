"""Word segmentation: spaced scripts by runs, scripts without spaces by letters (+ marks)."""

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apertus_jax.tokenizers.words import count_words, words


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", 0),
        ("hello", 1),
        ("hello world", 2),
        ("  hello \n\t world  ", 2),
        ("hello, world !", 2),
        ("- « » ...", 0),
        ("l'homme est-il", 2),
        ("in 1948", 2),
        ("人人生而自由", 6),
        ("1948年", 2),
        ("すべての人間は、", 7),
        ("มนุษย์ทั้งหลาย", 10),  # Thai: 14 code points, 4 of them combining marks
        ("འགྲོ་བ་", 3),  # Tibetan: three stacks (འ, གྲོ, བ); the tsheg is punctuation
        ("모든 인간은", 2),
        ("Все люди", 2),
        ("يولد جميع الناس", 3),
    ],
)
def test_counts(text, expected):
    assert count_words(text) == expected
    assert len(words(text)) == expected


def test_udhr_sample(udhr_sample):
    # Real text: spaced languages have a plausible words-per-character ratio.
    english = udhr_sample["eng"]
    assert count_words(english) == len(english.split())
    chinese = udhr_sample["cmn_hans"]
    assert count_words(chinese) == sum(unicodedata.category(c) == "Lo" for c in chinese) == 39


@given(
    st.lists(st.from_regex(r"[a-zA-Z0-9]{1,8}", fullmatch=True), max_size=20),
    st.sampled_from([" ", "  ", "\n", " \t "]),
)
def test_spaced_words_are_whitespace_runs(tokens, separator):
    assert count_words(separator.join(tokens)) == len(tokens)
