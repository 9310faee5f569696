"""The dominant writing system of a text, for per-script breakdowns of tokenization cost.

`dominant_script(text)` is the Unicode script (names as in `\\p{Script=...}`) with the most characters
in `text`, among `SCRIPTS`; "Other" when none of its characters belongs to them (digits, punctuation
and combining marks belong to the scripts "Common" and "Inherited" and never count).
"""

import collections

import regex

SCRIPTS = (
    "Latin",
    "Cyrillic",
    "Greek",
    "Armenian",
    "Georgian",
    "Arabic",
    "Hebrew",
    "Syriac",
    "Thaana",
    "Nko",
    "Adlam",
    "Ethiopic",
    "Tifinagh",
    "Vai",
    "Bamum",
    "Devanagari",
    "Bengali",
    "Gurmukhi",
    "Gujarati",
    "Oriya",
    "Tamil",
    "Telugu",
    "Kannada",
    "Malayalam",
    "Sinhala",
    "Grantha",
    "Chakma",
    "Ol_Chiki",
    "Tibetan",
    "Myanmar",
    "Thai",
    "Lao",
    "Khmer",
    "Tai_Tham",
    "Tai_Le",
    "New_Tai_Lue",
    "Tai_Viet",
    "Javanese",
    "Balinese",
    "Sundanese",
    "Buginese",
    "Batak",
    "Han",
    "Hiragana",
    "Katakana",
    "Hangul",
    "Bopomofo",
    "Yi",
    "Mongolian",
    "Cherokee",
    "Canadian_Aboriginal",
    "Osage",
)

_RUNS = regex.compile("|".join(rf"(\p{{Script={script}}}+)" for script in SCRIPTS))


def dominant_script(text: str) -> str:
    """The script of `SCRIPTS` with the most characters in `text`; "Other" if none occurs.

    Ties go to the script listed first in `SCRIPTS`.
    """
    counts = collections.Counter()
    for match in _RUNS.finditer(text):
        counts[match.lastindex - 1] += len(match.group(match.lastindex))
    if not counts:
        return "Other"
    return SCRIPTS[min(counts, key=lambda index: (-counts[index], index))]
