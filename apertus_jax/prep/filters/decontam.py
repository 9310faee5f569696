"""Decontamination of post-training data against benchmark prompts (Apertus 4.1.2, docs/recipe.md 9).

Two stages on token sequences: (1) a screen keeps the benchmark prompts sharing at least one exact token
n-gram (n = 8) with the training text; (2) for each of them, Ratcliff-Obershelp matching blocks
(`difflib.SequenceMatcher`) are computed, blocks shorter than 5 tokens dropped, and the pair is contaminated
if the remaining blocks cover more than half of the benchmark prompt's tokens.

The default tokenizer is script-agnostic, so translations that keep names, terms and numbers are caught: NFKC,
case folding, Cyrillic transliterated to Latin (Serbian/Croatian letter correspondences), combining accents
removed (U+0300-U+036F), then words, numbers, single punctuation marks, and single characters of scripts
written without spaces (Han, kana, Thai, ...). Whitespace is not a token, so re-wrapped lines tokenize
identically. Any `str -> list` callable (e.g. a subword tokenizer's `encode`) can replace it.
A translation that changes every run of 8 tokens (e.g. renames all technical terms) passes the screen
unseen: the method's known limit (tests/prep/filters/test_decontam.py has a real example from the exams sets).
"""

import dataclasses
import difflib
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Sequence

_CYRILLIC_TO_LATIN = {
    "а": "a", "б": "b", "в": "v", "г": "g", "ґ": "g", "д": "d", "ђ": "đ", "ѓ": "gj", "е": "e", "ё": "e",
    "є": "je", "ж": "ž", "з": "z", "ѕ": "dz", "и": "i", "і": "i", "ї": "ji", "й": "j", "ј": "j", "к": "k",
    "ќ": "kj", "л": "l", "љ": "lj", "м": "m", "н": "n", "њ": "nj", "о": "o", "п": "p", "р": "r", "с": "s",
    "т": "t", "ћ": "ć", "у": "u", "ў": "u", "ф": "f", "х": "h", "ц": "c", "ч": "č", "џ": "dž", "ш": "š",
    "щ": "šč", "ъ": "", "ы": "y", "ь": "", "э": "e", "ю": "ju", "я": "ja",
}  # fmt: skip
_TRANSLITERATE = str.maketrans(_CYRILLIC_TO_LATIN)
_DIACRITICS = re.compile("[\u0300-\u036f]")  # combining accents of Latin/Greek/Cyrillic; kana marks are kept
_NO_SPACE_SCRIPTS = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han
)
_TOKEN = re.compile(rf"[{_NO_SPACE_SCRIPTS}]|[^\W{_NO_SPACE_SCRIPTS}]+|[^\w\s]")


def default_tokenize(text: str) -> list[str]:
    """Script-agnostic word tokens: see the module docstring. Deterministic, no model needed."""
    text = unicodedata.normalize("NFKC", text).casefold().translate(_TRANSLITERATE)
    text = unicodedata.normalize("NFC", _DIACRITICS.sub("", unicodedata.normalize("NFD", text)))
    return _TOKEN.findall(text)


@dataclasses.dataclass(frozen=True)
class Flag:
    """A contaminated (training text, benchmark prompt) pair.

    overlap: tokens of the benchmark prompt covered by matching blocks of >= min_block tokens.
    prompt_tokens: length of the benchmark prompt in tokens; ratio = overlap / prompt_tokens (> 0.5).
    """

    prompt_id: str
    overlap: int
    prompt_tokens: int

    @property
    def ratio(self) -> float:
        return self.overlap / self.prompt_tokens


class Decontaminator:
    """Flags training texts that contain a benchmark prompt (docs/recipe.md 9: 8-gram screen, difflib blocks >= 5).

    Args:
      prompts: benchmark prompts, `{prompt_id: text}`.
      n: screen n-gram length in tokens (8). Prompts shorter than n tokens can never pass the screen.
      min_block: matching blocks shorter than this are dropped (5).
      threshold: contaminated if overlap > threshold * prompt length (0.5).
      tokenize: `str -> list` of hashable tokens; default `default_tokenize`.
    Raises:
      ValueError: no prompts, or n / min_block < 1.
    """

    def __init__(
        self,
        prompts: dict[str, str],
        n: int = 8,
        min_block: int = 5,
        threshold: float = 0.5,
        tokenize: Callable[[str], Sequence] = default_tokenize,
    ):
        if not prompts:
            raise ValueError("Decontaminator needs at least one benchmark prompt")
        if n < 1 or min_block < 1:
            raise ValueError(f"n ({n}) and min_block ({min_block}) must be >= 1")
        self.n, self.min_block, self.threshold, self.tokenize = n, min_block, threshold, tokenize
        self.prompt_tokens = {pid: list(tokenize(text)) for pid, text in prompts.items()}
        self._index = defaultdict(set)
        for pid, tokens in self.prompt_tokens.items():
            for gram in self._ngrams(tokens):
                self._index[gram].add(pid)

    def _ngrams(self, tokens: Sequence) -> set[tuple]:
        return {tuple(tokens[i : i + self.n]) for i in range(len(tokens) - self.n + 1)}

    def overlap(self, prompt: Sequence, text: Sequence) -> int:
        """Prompt tokens covered by Ratcliff-Obershelp matching blocks of at least `min_block` tokens."""
        blocks = difflib.SequenceMatcher(None, prompt, text, autojunk=False).get_matching_blocks()
        return sum(block.size for block in blocks if block.size >= self.min_block)

    def check(self, text: str) -> list[Flag]:
        """Contaminated pairs for one training text, sorted by prompt id (empty list: clean)."""
        tokens = list(self.tokenize(text))
        candidates = set()
        for gram in self._ngrams(tokens):
            candidates |= self._index.get(gram, set())
        flags = []
        for pid in sorted(candidates):
            prompt = self.prompt_tokens[pid]
            overlap = self.overlap(prompt, tokens)
            if overlap > self.threshold * len(prompt):
                flags.append(Flag(pid, overlap, len(prompt)))
        return flags
