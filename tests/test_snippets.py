"""The Python blocks of README.md and docs/*.md run as written. A block that names a path of `/tmp/` or
`path/to/` works with files: it runs in a Python process of its own in a temporary folder (its `/tmp/` moved
there, the trained workdir, HF checkpoint or task folder it reads put in place) and is `slow`; the others run
in the test process, `slow` too when they build a model (seconds of tracing). A block whose first line is
`# fragment: ...` is a piece of a recipe, not a program: the line says what runs it (docs/architecture.md's
recipes run in tests/test_architecture.py)."""

import json
import math
import os
import re
import subprocess
import sys

import ml_collections
import pytest

from apertus_jax.config.schema import parse

from .conftest import write_tiny_workdir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = [
    "README.md",
    *sorted(f"docs/{n}" for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md")),
]
PYTHON_BLOCK = re.compile(r"^```python\n(?P<code>.*?)^```", re.MULTILINE | re.DOTALL)
FRAGMENT = "# fragment: "
# Fragments are few: the front door's signature and the four recipes of docs/architecture.md.
MOST_FRAGMENTS = 5
# The paths of blocks that work with files (`runs_apart`).
FILE_PATH = re.compile(r"/tmp/|path/to/")
# What makes a block that runs in the test process slow: building a model.
BUILDS_A_MODEL = "create_model("


def python_blocks() -> list[tuple[str, int, str]]:
    """(page, line of its opening fence, code) of every ```python block of the pages, in order."""
    found = []
    for page in PAGES:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            text = f.read()
        found += [(page, text.count("\n", 0, m.start()) + 1, m["code"]) for m in PYTHON_BLOCK.finditer(text)]
    return found


def runs_apart(code: str) -> bool:
    """Whether a block works with files: it runs in a process of its own (and is slow)."""
    return bool(FILE_PATH.search(code))


def _params():
    params = []
    for page, line, code in python_blocks():
        if code.startswith(FRAGMENT):
            continue
        marks = [pytest.mark.slow] if runs_apart(code) or BUILDS_A_MODEL in code else []
        params.append(pytest.param(page, code, id=f"{page}:{line}", marks=marks))
    return params


def test_blocks_are_found_and_fragments_are_few_and_say_what_runs_them():
    blocks = python_blocks()
    assert len(blocks) >= 13 and {page for page, _, _ in blocks} >= {"docs/usage.md", "docs/architecture.md"}
    fragments = [(page, line, code) for page, line, code in blocks if code.startswith(FRAGMENT)]
    assert len(fragments) <= MOST_FRAGMENTS, [f"{page}:{line}" for page, line, _ in fragments]
    for page, line, code in fragments:
        said = code.partition("\n")[0][len(FRAGMENT) :]
        runner = re.search(r"tests/[\w/]+\.py", said)
        assert runner and os.path.isfile(os.path.join(ROOT, runner.group())), f"{page}:{line}: {said}"
    assert runs_apart('load_workdir("/tmp/apertus_demo")') and not runs_apart("muon(lr, axes)")


@pytest.mark.parametrize("page, code", _params())
def test_every_python_block_runs_as_written(page, code, tmp_path, monkeypatch, request):
    if runs_apart(code):
        _run_apart(code, tmp_path, request)
        return
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__snippet__"}
    exec(compile(code, page, "exec"), namespace)  # noqa: S102 - the documented code, as a reader runs it
    # A config a block builds or defines (a config file's get_config) is a run config of the schema.
    get_config = namespace.get("get_config")
    defined = getattr(get_config, "__module__", None) == namespace["__name__"]
    config = get_config() if defined else namespace.get("config")
    if isinstance(config, ml_collections.ConfigDict):
        parse(config)


def _put_inputs(code: str, tmp_path, request) -> None:
    """The files a block reads, where it reads them: a trained workdir of the demo's kind at /tmp/apertus_demo
    (`write_tiny_workdir`), the local German exams task at /tmp/lm_eval_tasks, a HF checkpoint at
    path/to/Apertus-8B (the `hf_dir` fixture)."""
    if "/tmp/apertus_demo" in code:
        os.makedirs(tmp_path / "apertus_demo")
        write_tiny_workdir(str(tmp_path / "apertus_demo"), 3)
    if "/tmp/lm_eval_tasks" in code:
        os.symlink(request.getfixturevalue("exams_task_dir"), tmp_path / "lm_eval_tasks")
    if "path/to/Apertus-8B" in code:
        os.makedirs(tmp_path / "path" / "to")
        os.symlink(request.getfixturevalue("hf_dir"), tmp_path / "path" / "to" / "Apertus-8B")


def _run_apart(code: str, tmp_path, request) -> None:
    """Runs `code` (its /tmp/ moved into `tmp_path`) with `python` in `tmp_path`, as a reader runs a saved
    block: on one CPU device (none of the tests' XLA flags), the session's XLA cache; then the checks of what it
    wrote (`CHECKS`)."""
    _put_inputs(code, tmp_path, request)
    script = tmp_path / "snippet.py"
    script.write_text(code.replace("/tmp/", f"{tmp_path}/"), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(
        PYTHONPATH=ROOT,
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=request.getfixturevalue("compilation_cache"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
    )
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for output, check in CHECKS.items():
        if output in code:
            check(tmp_path / output.removeprefix("/tmp/"), result.stderr)


def _check_training(workdir, stderr: str) -> None:
    """docs/usage.md "Training from Python": the demo's model on its 4,096-id BPE (the first loss is a uniform
    guess over 4,096 ids, not over tekken's 131,072) logs the start-up and one line per step as the commands do,
    with no warning (its schedule ends with the run)."""
    with open(workdir / "metrics.jsonl") as f:
        records = [json.loads(line) for line in f]
    steps = [r for r in records if "loss" in r]
    assert [r["step"] for r in steps] == list(range(1, 11))
    assert abs(steps[0]["loss"] - math.log(4096)) < 0.1 and steps[-1]["loss"] < steps[0]["loss"] - 0.5
    lines = stderr.splitlines()
    shown = [line for line in lines if re.match(r"I \d\d:\d\d:\d\d step \d+/10 \| loss ", line)]
    assert len(shown) == 10, stderr[-3000:]
    assert any(re.match(r"I \d\d:\d\d:\d\d train step: compiling", line) for line in lines), stderr[-3000:]
    assert not [line for line in lines if line.startswith(("W ", "WARNING"))], stderr[-3000:]


# What a block that writes OUTPUT must have written there, and logged.
CHECKS = {"/tmp/apertus_python": _check_training}
