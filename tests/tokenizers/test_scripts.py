"""dominant_script on real text of many writing systems."""

import pytest

from apertus_jax.tokenizers.scripts import dominant_script


@pytest.mark.parametrize(
    "lang, script",
    [
        ("eng", "Latin"),
        ("vie", "Latin"),
        ("yor", "Latin"),
        ("rus", "Cyrillic"),
        ("cmn_hans", "Han"),
        ("jpn", "Hiragana"),
        ("arb", "Arabic"),
        ("heb", "Hebrew"),
        ("hin", "Devanagari"),
        ("tha", "Thai"),
        ("kor", "Hangul"),
        ("amh", "Ethiopic"),
        ("ell_monotonic", "Greek"),
        ("mya", "Myanmar"),
        ("khm", "Khmer"),
        ("bod", "Tibetan"),
        ("tam", "Tamil"),
        ("chr_cased", "Cherokee"),
        ("zgh", "Tifinagh"),
    ],
)
def test_udhr_scripts(udhr_sample, lang, script):
    assert dominant_script(udhr_sample[lang]) == script


def test_edge_cases():
    assert dominant_script("") == "Other"
    assert dominant_script("1948 - 2024 !") == "Other"  # Common script only
    assert dominant_script("UDHR: Всеобщая декларация") == "Cyrillic"  # 18 Cyrillic vs 4 Latin
    assert dominant_script("ab аб") == "Latin"  # a tie goes to the script listed first
    assert dominant_script("ꪁꪫꪱꪣ ꪜꪱꪫ") == "Tai_Viet"
