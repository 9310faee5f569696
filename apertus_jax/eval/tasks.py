"""Multiple-choice evaluation data from PyPI (docs/data.md): exams-qa from the `evals==3.0.1.post1` wheel (MIT).

`evals/registry/data/<language>-exams-qa/samples.jsonl` holds, e.g., 575 German exam questions with 3-5
options. The wheel is fetched once and read in place (`apertus_jax.pypi`). Evaluation data: never train on it.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable

from apertus_jax.eval.multiple_choice import MultipleChoiceQuestion
from apertus_jax.pypi import PypiArchive, fetch_archive

EVALS_WHEEL = PypiArchive(
    "evals==3.0.1.post1",
    "evals-3.0.1.post1-py3-none-any.whl",
    "0abcb2051303500784b1641a6e4f6b813ed43ad64f879a37d344a6774eb8eb78",
    sdist=False,
)
EXAMS_QA_PROMPT_SUFFIX = "\nAnswer:"
_OPTION = re.compile(r"^([A-Z])\. (.*)$")


def parse_exams_qa(row: dict, question_id: str) -> MultipleChoiceQuestion:
    """One `samples.jsonl` row -> a cloze-style question: prompt = question text + "\\nAnswer:", options
    " <option text>" (the lettered option list is not shown to the model; the answer letter is `ideal`).

    Row format: `{"input": [system message, {"role": "user", "content": "<question>\\nA. ...\\nB. ...
    \\nAnswer:"}], "ideal": "[B]"}`.

    Raises:
      ValueError: the row does not have that format.
    """
    try:
        content = row["input"][-1]["content"]
        answer_letter = re.fullmatch(r"\[([A-Z])\]", row["ideal"]).group(1)
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ValueError(
            f"{question_id}: not an exams-qa row (needs input[-1].content and ideal '[X]')"
        ) from None
    if not content.endswith(EXAMS_QA_PROMPT_SUFFIX):
        raise ValueError(f"{question_id}: the user message does not end with {EXAMS_QA_PROMPT_SUFFIX!r}")
    lines = content[: -len(EXAMS_QA_PROMPT_SUFFIX)].split("\n")
    options: list[tuple[str, str]] = []  # (letter, text), read from the end up to option "A"
    while lines and (m := _OPTION.match(lines[-1])):
        options.insert(0, (m.group(1), m.group(2)))
        lines.pop()
        if m.group(1) == "A":
            break
    letters = [chr(ord("A") + i) for i in range(len(options))]
    if (
        len(options) < 2
        or [letter for letter, _ in options] != letters
        or answer_letter not in letters
        or not lines
    ):
        raise ValueError(
            f"{question_id}: could not parse >= 2 options A., B., ... with answer {answer_letter}"
        )
    question = "\n".join(lines).strip()
    return MultipleChoiceQuestion(
        question_id=question_id,
        prompt=question + EXAMS_QA_PROMPT_SUFFIX,
        options=tuple(" " + text.strip() for _, text in options),
        answer=letters.index(answer_letter),
    )


def parse_exams_qa_lines(lines: Iterable[str], name: str) -> list[MultipleChoiceQuestion]:
    """Parses JSON lines of an exams-qa `samples.jsonl`; ids are `<name>/<line index>`.

    Raises:
      ValueError: a line that is not JSON or not an exams-qa row, named by its id.
    """
    questions = []
    for i, line in enumerate(lines):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{name}/{i}: not a JSON line ({error.msg})") from None
            questions.append(parse_exams_qa(row, f"{name}/{i}"))
    return questions


def load_exams_qa(language: str = "german", wheel_path: str | None = None) -> list[MultipleChoiceQuestion]:
    """All questions of `<language>-exams-qa` from the evals wheel (fetched into the cache if needed).

    Raises:
      ValueError: the wheel has no such language (the message lists the available ones).
    """
    name = f"{language}-exams-qa"
    with zipfile.ZipFile(wheel_path or fetch_archive(EVALS_WHEEL)) as wheel:
        member = f"evals/registry/data/{name}/samples.jsonl"
        if member not in wheel.namelist():
            available = sorted(
                n.split("/")[3][: -len("-exams-qa")]
                for n in wheel.namelist()
                if n.endswith("-exams-qa/samples.jsonl")
            )
            raise ValueError(f"no exams-qa set for language {language!r}; available: {', '.join(available)}")
        return parse_exams_qa_lines(wheel.read(member).decode("utf-8").splitlines(), name)
