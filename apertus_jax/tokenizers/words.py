"""Word segmentation for fertility (tokens per word) across scripts with and without spaces.

Rule (Unicode-aware, no dictionaries, the same for every language):
  * Scripts written without spaces between words (`NO_SPACE_SCRIPTS`: Han, Hiragana, Katakana, Thai,
    Lao, Khmer, Myanmar, Tibetan, Yi, ...): every letter with its following combining marks (about
    one grapheme cluster, e.g. Thai "กี" or a Tibetan stack) is one word. A character approximates a
    word in Chinese; in Thai, Khmer or Japanese kana it over-counts words, so fertility there is lower
    than with a dictionary segmenter. Tibetan tsheg and other punctuation are not words.
  * Every other script: each maximal run of non-space characters (outside the scripts above) that
    contains at least one letter or digit is one word; punctuation-only runs ("-", "«") are not words.
Examples: "" -> 0, "hello" -> 1, "hello world" -> 2, "hello, world !" -> 2, "人人生而自由" -> 6,
"1948年" -> 2.
"""

import regex

NO_SPACE_SCRIPTS = (
    "Han",
    "Hiragana",
    "Katakana",
    "Bopomofo",
    "Thai",
    "Lao",
    "Khmer",
    "Myanmar",
    "Tibetan",
    "Yi",
    "Javanese",
    "Balinese",
    "Tai_Tham",
    "Tai_Le",
    "New_Tai_Lue",
)

_NO_SPACE = "".join(rf"\p{{{script}}}" for script in NO_SPACE_SCRIPTS)
_CANDIDATE = regex.compile(
    rf"(?=\p{{L}})[{_NO_SPACE}]\p{{M}}*"  # a letter of a script without spaces, with its marks
    rf"|[^\s{_NO_SPACE}]+"
)  # a run of other non-space characters
_LETTER_OR_DIGIT = regex.compile(r"[\p{L}\p{N}]")


def words(text: str) -> list[str]:
    """The words of `text` under the rule in the module docstring, in order."""
    return [word for word in _CANDIDATE.findall(text) if _LETTER_OR_DIGIT.search(word)]


def count_words(text: str) -> int:
    """Number of words of `text` (module docstring); 0 for "" or punctuation only."""
    return len(words(text))
