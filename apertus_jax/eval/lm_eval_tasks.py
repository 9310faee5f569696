"""Local lm-evaluation-harness task definitions: a task YAML over a local JSON Lines file (docs/lm_eval.md).

The harness loads task data with `datasets.load_dataset`; `dataset_path: json` plus
`dataset_kwargs.data_files` reads a local file instead of a hub dataset, so nothing is downloaded.

    python -m experiments.lm_eval_task --output_dir=/tmp/lm_eval_tasks            # german-exams-qa
    python -m experiments.lm_eval_task --output_dir=DIR --samples=tests/eval/assets/german_exams_qa_first20.jsonl

(`write_exams_qa_task`) writes `DIR/german_exams_qa.jsonl` (one question a line: `question_id`, `prompt`,
`options`, `answer`) and
`DIR/german_exams_qa.yaml` (absolute data path), for `--include_path DIR --tasks german_exams_qa`.

The task is the cloze form of `eval.tasks.parse_exams_qa` (question + "\\nAnswer:", options with their
leading space) with `target_delimiter: ""`, so the harness scores exactly the requests of
`eval.multiple_choice.evaluate_multiple_choice`: `acc` is our `accuracy_unnormalized`, `acc_norm` our
`accuracy_per_char` and `acc_bytes` our `accuracy_per_byte` (both divide by the option text with its space).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import yaml

from apertus_jax import files
from apertus_jax.eval.multiple_choice import MultipleChoiceQuestion
from apertus_jax.eval.tasks import load_exams_qa, parse_exams_qa_lines

METRICS = ("acc", "acc_norm", "acc_bytes")


def task_config(task: str, data_file: str) -> dict:
    """The harness task config (YAML contents) of a multiple-choice task over `data_file` (JSON Lines with
    `prompt`, `options`, `answer` columns), evaluated on all rows (split "test"), zero-shot."""
    return {
        "task": task,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": os.path.abspath(data_file)}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "prompt",
        "doc_to_choice": "options",
        "doc_to_target": "answer",
        "target_delimiter": "",
        "metric_list": [{"metric": m, "aggregation": "mean", "higher_is_better": True} for m in METRICS],
        "metadata": {"version": 1.0},
    }


def write_multiple_choice_task(directory: str, task: str, questions: Sequence[MultipleChoiceQuestion]) -> str:
    """Write `DIR/<task>.jsonl` and `DIR/<task>.yaml` (each atomically); returns the YAML path.

    Raises:
      ValueError: no questions, or a task name that is not a plain identifier.
    """
    if not questions:
        raise ValueError("no questions to write")
    if not task.replace("_", "").isalnum():
        raise ValueError(f"task name {task!r} must be letters, digits and underscores")
    data_file = os.path.join(directory, f"{task}.jsonl")
    lines = [
        json.dumps(
            {
                "question_id": q.question_id,
                "prompt": q.prompt,
                "options": list(q.options),
                "answer": q.answer,
            },
            ensure_ascii=False,
        )
        for q in questions
    ]
    files.write_text(data_file, "\n".join(lines) + "\n")
    yaml_file = os.path.join(directory, f"{task}.yaml")
    files.write_text(
        yaml_file, yaml.safe_dump(task_config(task, data_file), sort_keys=False, allow_unicode=True)
    )
    return yaml_file


def write_exams_qa_task(
    directory: str,
    language: str = "german",
    samples: str | None = None,
    wheel: str | None = None,
    limit: int = 0,
) -> tuple[str, int]:
    """Write the task `<language>_exams_qa` of `<language>-exams-qa` into `directory` (module docstring).

    Args:
      directory: the folder of `<task>.jsonl` and `<task>.yaml` (created if missing).
      language: the exams-qa language.
      samples: a local exams-qa `samples.jsonl` instead of the pinned evals wheel (the wheel's
        `evals/registry/data/<language>-exams-qa/samples.jsonl`, or the repository's extract of its first 20
        German questions, `tests/eval/assets/german_exams_qa_first20.jsonl`).
      wheel: a local evals==3.0.1.post1 wheel (None: fetched into the cache).
      limit: the first `limit` questions only (0: all).

    Returns:
      (path of the YAML file, number of questions written).

    Raises:
      ValueError: a negative `limit`, a language the wheel does not have, a `samples` file that cannot be read
        or holds a line that is not an exams-qa row (one line naming `--samples` and the line).
      OSError: `wheel` cannot be read, `directory` cannot be written.
      Nothing is written when an error is raised.
    """
    if limit < 0:
        raise ValueError(f"--limit={limit} must be >= 0")
    if samples:
        try:
            with open(samples, encoding="utf-8") as f:
                questions = parse_exams_qa_lines(f.read().splitlines(), f"{language}-exams-qa")
        except (OSError, ValueError) as error:
            raise ValueError(
                f"--samples={samples}: {error}; pass an exams-qa samples.jsonl (the evals wheel's "
                f"evals/registry/data/{language}-exams-qa/samples.jsonl)"
            ) from None
    else:
        questions = load_exams_qa(language, wheel_path=wheel)
    questions = questions[:limit] if limit else questions
    return write_multiple_choice_task(directory, f"{language}_exams_qa", questions), len(questions)
