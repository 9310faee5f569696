"""Evaluation data: exams-qa parsing on the committed real extract, wheel reading, sonnets, pinned archives."""

import json
import pathlib
import re
import zipfile

import pytest

from apertus_jax.eval import tasks

EXTRACT = pathlib.Path(__file__).parent / "assets" / "german_exams_qa_first20.jsonl"


@pytest.fixture(scope="module")
def questions():
    return tasks.parse_exams_qa_lines(EXTRACT.read_text(encoding="utf-8").splitlines(), "german-exams-qa")


def test_parses_the_real_german_extract(questions):
    assert len(questions) == 20
    first, second = questions[0], questions[1]
    assert first.question_id == "german-exams-qa/0"
    assert first.prompt == (
        "Wie verändert sich die Kapazität eines Plattenkondensators, wenn zwischen seinen "
        "Platten vollständig, in voller Breite eine Platte aus Eisen geschoben wird?\nAnswer:"
    )
    assert first.options == (
        " Die Kapazität vermindert sich auf null.",
        " Sie verdoppelt sich.",
        " Die Kapazität ändert sich nicht.",
        " Sie mindert sich ungefähr auf die Hälfte.",
    )
    assert first.answer == 0  # ideal "[A]"
    assert len(second.options) == 3 and second.answer == 2  # ideal "[C]"
    assert all(2 <= len(q.options) <= 5 and 0 <= q.answer < len(q.options) for q in questions)
    assert not any(
        "\nA. " in q.prompt for q in questions
    )  # the lettered list is not part of the cloze prompt


@pytest.mark.parametrize(
    "row, message",
    [
        ({"input": [{"content": "Frage?\nA. x\nB. y\nAnswer:"}], "ideal": "B"}, "not an exams-qa row"),
        ({"input": [{"content": "Frage?\nA. x\nB. y"}], "ideal": "[B]"}, "does not end with"),
        ({"input": [{"content": "Frage?\nA. x\nAnswer:"}], "ideal": "[A]"}, "could not parse"),
        ({"input": [{"content": "Frage?\nA. x\nB. y\nAnswer:"}], "ideal": "[C]"}, "could not parse"),
        ({"input": [{"content": "Frage?\nA. x\nC. y\nAnswer:"}], "ideal": "[A]"}, "could not parse"),
    ],
)
def test_malformed_rows_raise(row, message):
    with pytest.raises(ValueError, match=message):
        tasks.parse_exams_qa(row, "x/0")


def test_reads_the_wheel_as_a_zip_and_names_available_languages(tmp_path):
    wheel = tmp_path / "evals.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("evals/registry/data/german-exams-qa/samples.jsonl", EXTRACT.read_bytes())
        z.writestr("evals/registry/data/croatian-exams-qa/samples.jsonl", EXTRACT.read_bytes())
    assert len(tasks.load_exams_qa("german", wheel_path=str(wheel))) == 20
    with pytest.raises(ValueError, match="available: croatian, german"):
        tasks.load_exams_qa("klingon", wheel_path=str(wheel))


def test_usage_page_states_the_german_option_counts():
    """docs/usage.md: "575 questions: 325 3-way, 212 4-way, 38 5-way", counted here from the pinned data."""
    import collections
    import pathlib

    try:
        questions = tasks.load_exams_qa("german")
    except FileNotFoundError as error:  # no PyPI access and nothing cached
        pytest.skip(str(error))
    counts = sorted(collections.Counter(len(q.options) for q in questions).items())
    stated = f"{len(questions)} questions: " + ", ".join(f"{n} {k}-way" for k, n in counts)
    usage = (pathlib.Path(__file__).parents[2] / "docs" / "usage.md").read_text(encoding="utf-8")
    usage = re.sub(r"<!-- result [^>]*-->", "", usage)  # the figures' result markers (docs/results.md)
    assert stated in " ".join(usage.split()), stated


def test_extract_is_unchanged_real_data():
    rows = [json.loads(line) for line in EXTRACT.read_text(encoding="utf-8").splitlines()]
    assert all(r["input"][0]["role"] == "system" and r["ideal"][0] == "[" for r in rows)
