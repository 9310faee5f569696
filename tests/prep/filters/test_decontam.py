"""Decontamination: 8-gram screen + difflib blocks >= 5 tokens, contaminated above half the prompt (docs/recipe.md 9)."""

import json
import pathlib

import pytest

from apertus_jax.prep.filters.decontam import Decontaminator, default_tokenize

ASSETS = pathlib.Path(__file__).parents[1] / "assets"
EXAMS = [
    json.loads(line) for line in (ASSETS / "exams_qa_extract.jsonl").read_text(encoding="utf-8").splitlines()
]
BY_LANG = {lang: [r for r in EXAMS if r["lang"] == lang] for lang in ("hr", "sr", "de")}


def test_tokens_ignore_case_line_breaks_and_script():
    assert default_tokenize("Koji  od\nnavedenih,\tORGANIZAMA") == [
        "koji",
        "od",
        "navedenih",
        ",",
        "organizama",
    ]
    assert default_tokenize("Који од наведених организама") == ["koji", "od", "navedenih", "organizama"]
    assert default_tokenize("水は100度で沸騰する") == ["水", "は", "100", "度", "で", "沸", "騰", "す", "る"]


def test_cyrillic_translations_of_croatian_questions_are_caught():
    """The Serbian exams set holds Cyrillic translations of Croatian items: another language and script."""
    decon = Decontaminator({r["id"]: r["prompt"] for r in BY_LANG["hr"]})
    caught = {}
    for hr, sr in zip(BY_LANG["hr"], BY_LANG["sr"]):
        assert [f.prompt_id for f in decon.check(hr["prompt"])] == [hr["id"]]
        flags = decon.check(f"Одговори на питање.\n{sr['prompt']}")
        caught[hr["id"]] = [f.prompt_id for f in flags] == [hr["id"]] and flags[0].ratio > 0.5
    # Item 2's translation also renames every answer option (stanična jezgra -> ћелијско једро, ...): no 8 tokens
    # in a row survive, so the screen cannot see it. That is the method's known limit, not a bug.
    assert [pid for pid, ok in caught.items() if not ok] == ["croatian-exams-qa/2"]


def test_latin_serbian_translation_is_caught():
    """Same script, other language: the Serbian (Latin alphabet, ekavian) version of a Croatian question."""
    decon = Decontaminator({r["id"]: r["prompt"] for r in BY_LANG["hr"]})
    serbian = (
        "Koji od navedenih organizama sadržava hlorofil u svojim ćelijama?\nA. zelena plesan\nB. krednjak\n"
        "C. cijanobakterija\nD. zelena pupavka\nAnswer:"
    )
    assert [f.prompt_id for f in decon.check(serbian)] == ["croatian-exams-qa/3"]


def test_rewrapped_question_in_a_chat_prompt_is_caught():
    question = BY_LANG["de"][1]["prompt"]
    words = question.replace("\n", " ").split(" ")
    rewrapped = "\n".join(" ".join(words[i : i + 5]) for i in range(0, len(words), 5))
    assert rewrapped.replace("\n", " ") != question and "\n" in rewrapped
    decon = Decontaminator({r["id"]: r["prompt"] for r in BY_LANG["de"]})
    flags = decon.check(
        f"User: Please solve this exam question step by step.\n\n{rewrapped}\n\nAssistant: ..."
    )
    assert [f.prompt_id for f in flags] == [BY_LANG["de"][1]["id"]]
    assert flags[0].ratio == 1.0


@pytest.fixture
def ten_gram_prompt():
    """A benchmark prompt of exactly 17 tokens = 10 overlapping 8-grams, taken from a German exam question."""
    tokens = default_tokenize(BY_LANG["de"][0]["prompt"])[:17]
    return " ".join(tokens), tokens


def _filler(i):
    return BY_LANG["de"][5 + i]["prompt"]  # unrelated German exam text, real prose


@pytest.mark.parametrize("shared,flagged", [(1, False), (8, True), (10, True)])
def test_shared_ngrams_out_of_ten(ten_gram_prompt, shared, flagged):
    prompt, tokens = ten_gram_prompt
    decon = Decontaminator({"q": prompt})
    paragraph = f"{_filler(0)} {' '.join(tokens[: shared + 7])} {_filler(1)}"
    assert len(decon._ngrams(tokens) & decon._ngrams(default_tokenize(paragraph))) == shared
    assert bool(decon.check(paragraph)) is flagged


def test_short_scattered_overlaps_are_not_counted(ten_gram_prompt):
    """Passing the screen is not enough: 4-token pieces elsewhere do not add to the overlap."""
    prompt, tokens = ten_gram_prompt
    decon = Decontaminator({"q": prompt})
    pieces = " ".join(" ".join(tokens[i : i + 4]) + " und dann" for i in range(8, 17, 4))
    assert decon.overlap(tokens, default_tokenize(f"{' '.join(tokens[:8])} und dann {pieces}")) == 8


def test_bad_arguments():
    with pytest.raises(ValueError, match="at least one"):
        Decontaminator({})
    with pytest.raises(ValueError, match="min_block"):
        Decontaminator({"q": "x"}, min_block=0)
