"""Local lm-evaluation-harness task definitions: a task YAML over a local JSON Lines file (docs/lm_eval.md).

The harness loads task data with `datasets.load_dataset`; `dataset_path: json` plus
`dataset_kwargs.data_files` reads a local file instead of a hub dataset, so nothing is downloaded.

    python -m apertus_jax.eval.lm_eval_tasks --output_dir=/tmp/lm_eval_tasks            # german-exams-qa
    python -m apertus_jax.eval.lm_eval_tasks --output_dir=DIR --samples=samples.jsonl --limit=20

writes `DIR/german_exams_qa.jsonl` (one question a line: `question_id`, `prompt`, `options`, `answer`) and
`DIR/german_exams_qa.yaml` (absolute data path), for `--include_path DIR --tasks german_exams_qa`.

The task is the cloze form of `eval.tasks.parse_exams_qa` (question + "\\nAnswer:", options with their
leading space) with `target_delimiter: ""`, so the harness scores exactly the requests of
`eval.multiple_choice.evaluate_multiple_choice`: `acc` is our `accuracy_unnormalized`, `acc_norm` our
`accuracy_per_char` and `acc_bytes` our `accuracy_per_byte` (both divide by the option text with its space).
A bad argument ends with one line on stderr and exit status 2; nothing is written then.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Sequence

import yaml

from apertus_jax.eval.multiple_choice import MultipleChoiceQuestion

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
    os.makedirs(directory, exist_ok=True)
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
    _atomic_write(data_file, "\n".join(lines) + "\n")
    yaml_file = os.path.join(directory, f"{task}.yaml")
    _atomic_write(
        yaml_file, yaml.safe_dump(task_config(task, data_file), sort_keys=False, allow_unicode=True)
    )
    return yaml_file


def _atomic_write(path: str, text: str) -> None:
    with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(path), delete=False, encoding="utf-8") as f:
        f.write(text)
    os.replace(f.name, path)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI (see the module docstring); returns the exit status."""
    import argparse

    from apertus_jax.eval.tasks import load_exams_qa, parse_exams_qa_lines

    parser = argparse.ArgumentParser(description="Write a local lm-eval task for <language>-exams-qa.")
    parser.add_argument("--output_dir", required=True, help="directory for <task>.yaml and <task>.jsonl")
    parser.add_argument("--language", default="german", help="exams-qa language (default german)")
    parser.add_argument("--samples", help="a local exams-qa samples.jsonl instead of the pinned evals wheel")
    parser.add_argument("--wheel", help="a local evals==3.0.1.post1 wheel (default: fetched into the cache)")
    parser.add_argument("--limit", type=int, default=0, help="first N questions only (0 = all)")
    args = parser.parse_args(argv)
    name = f"{args.language}-exams-qa"
    try:
        if args.limit < 0:
            raise ValueError(f"--limit={args.limit} must be >= 0")
        if args.samples:
            with open(args.samples, encoding="utf-8") as f:
                questions = parse_exams_qa_lines(f.read().splitlines(), name)
        else:
            questions = load_exams_qa(args.language, wheel_path=args.wheel)
        questions = questions[: args.limit] if args.limit else questions
        path = write_multiple_choice_task(args.output_dir, f"{args.language}_exams_qa", questions)
    except (OSError, ValueError) as err:
        print(f"lm_eval_tasks: {err}", file=sys.stderr)
        return 2
    print(f"wrote {path} ({len(questions)} questions); run with --include_path {args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
