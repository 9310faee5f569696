"""Local lm-eval task files: the written JSON Lines and YAML, loaded by lm-eval's TaskManager into the
requests of `eval.multiple_choice`; the exams-qa task of `experiments.lm_eval_task` and its bad input."""

import json
import os
import pathlib

import pytest
import yaml

from apertus_jax.eval.lm_eval_tasks import task_config, write_exams_qa_task, write_multiple_choice_task
from apertus_jax.eval.tasks import parse_exams_qa_lines

EXTRACT = pathlib.Path(__file__).parent / "assets" / "german_exams_qa_first20.jsonl"


def questions():
    return parse_exams_qa_lines(EXTRACT.read_text(encoding="utf-8").splitlines(), "german-exams-qa")


def test_written_files_hold_every_question(tmp_path):
    path = write_multiple_choice_task(str(tmp_path), "german_exams_qa", questions())
    assert sorted(os.listdir(tmp_path)) == ["german_exams_qa.jsonl", "german_exams_qa.yaml"]
    config = yaml.safe_load(pathlib.Path(path).read_text(encoding="utf-8"))
    assert config == task_config("german_exams_qa", str(tmp_path / "german_exams_qa.jsonl"))
    assert config["dataset_path"] == "json" and os.path.isabs(config["dataset_kwargs"]["data_files"]["test"])
    rows = [json.loads(line) for line in (tmp_path / "german_exams_qa.jsonl").read_text("utf-8").splitlines()]
    assert [(r["prompt"], tuple(r["options"]), r["answer"]) for r in rows] == [
        (q.prompt, q.options, q.answer) for q in questions()
    ]
    assert rows[0]["prompt"].startswith("Wie verändert sich die Kapazität")  # UTF-8 text, not escapes


def test_lm_eval_builds_our_requests_from_it(exams_task_dir):
    lm_eval_tasks = pytest.importorskip("lm_eval.tasks")
    task = lm_eval_tasks.get_task_dict(
        ["german_exams_qa"], lm_eval_tasks.TaskManager(include_path=exams_task_dir, include_defaults=False)
    )["german_exams_qa"]
    docs = list(task.test_docs())
    assert len(docs) == 20
    first = questions()[0]
    assert task.doc_to_text(docs[0]) == first.prompt
    assert task.doc_to_choice(docs[0]) == list(first.options)
    assert task.doc_to_target(docs[0]) == first.answer
    requests = task.construct_requests(docs[0], task.doc_to_text(docs[0]), metadata=("german_exams_qa", 0, 1))
    assert [r.args for r in requests] == [(first.prompt, option) for option in first.options]


def test_exams_qa_task_is_limited_and_bad_input_writes_nothing(tmp_path):
    out = tmp_path / "tasks"
    path, count = write_exams_qa_task(str(out), samples=str(EXTRACT), limit=3)
    assert (path, count) == (str(out / "german_exams_qa.yaml"), 3)
    assert len((out / "german_exams_qa.jsonl").read_text("utf-8").splitlines()) == 3
    assert sorted(os.listdir(out)) == ["german_exams_qa.jsonl", "german_exams_qa.yaml"]  # no temp file left
    bad = tmp_path / "bad"
    with pytest.raises(ValueError, match=r"^--samples=.*missing\.jsonl: \[Errno 2\] No such file"):
        write_exams_qa_task(str(bad), samples=str(tmp_path / "missing.jsonl"))
    with pytest.raises(ValueError, match="--limit=-1"):
        write_exams_qa_task(str(bad), samples=str(EXTRACT), limit=-1)
    assert not bad.exists()
    with pytest.raises(ValueError, match="no questions"):
        write_multiple_choice_task(str(bad), "x", [])
    with pytest.raises(ValueError, match="task name"):
        write_multiple_choice_task(str(bad), "bad name", questions())
