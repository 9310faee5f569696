"""Running a measurement's documented commands and reading what they write.

    seconds = documented("python -m experiments.pretrain ... --workdir=/tmp/run", root, scratch, {})
    losses = [r["loss"] for r in step_records(os.path.join(scratch, "run"))]

A documented command line is run as a reader would type it, in the repository ROOT with this interpreter, its
`/tmp/` paths moved into the measurement's scratch directory. Its values are read from the files it writes
(`--json`, `--out`, a workdir's metrics.jsonl) or from the one JSON object it prints (`printed_json`), not
from lines it prints for a reader; `run(..., capture=True)` returns the printed text for the two records
whose commands predate a JSON output (the demo BPE's time, the document mask's cost).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

from apertus_jax import files


def run(argv: list[str], root: str, env: dict[str, str], capture: bool = False) -> str:
    """Runs `argv` in ROOT with `env` added to this process's environment; its output goes to this process's
    (the progress of long runs), and with `capture` its stdout is also returned.

    Raises:
      ChildProcessError: it exited with a non-zero status.
    """
    stdout = subprocess.PIPE if capture else None
    with subprocess.Popen(argv, cwd=root, env={**os.environ, **env}, stdout=stdout, text=True) as process:
        printed = []
        for line in process.stdout if capture else ():
            print(line, end="", flush=True)
            printed.append(line)
    if process.returncode:
        raise ChildProcessError(
            f"`{' '.join(argv)}` exited with status {process.returncode} (its output is above)"
        )
    return "".join(printed)


def documented(line: str, root: str, scratch: str, env: dict[str, str]) -> float:
    """Runs a documented `python -m ...` command line in ROOT, its `/tmp/` paths moved into `scratch`, with this
    interpreter and `env` added to the environment; returns its wall seconds.

    Raises:
      ChildProcessError: it failed.
    """
    argv = [sys.executable, *shlex.split(line.replace("/tmp/", scratch + "/"))[1:]]
    start = time.perf_counter()
    run(argv, root, env)
    return time.perf_counter() - start


def printed_json(line: str, root: str, env: dict[str, str]) -> dict:
    """Runs a documented `python -m ...` command line that prints one JSON object (as `documented`, its
    output shown); returns that object.

    Raises:
      ChildProcessError: it failed. ValueError: it printed no JSON object.
    """
    return json.loads(run([sys.executable, *shlex.split(line)[1:]], root, env, capture=True))


def output_path(line: str, scratch: str, flag: str) -> str:
    """The path a documented command line names with `--FLAG=/tmp/...`, moved into `scratch` as `documented`
    runs it."""
    (path,) = (
        arg.split("=", 1)[1]
        for arg in shlex.split(line.replace("/tmp/", scratch + "/"))
        if arg.startswith(f"--{flag}=")
    )
    return path


def written_json(line: str, scratch: str) -> dict | list:
    """The JSON file a documented command line wrote to the path of its `--json=/tmp/...` flag (run in
    `scratch` by `documented`)."""
    with open(output_path(line, scratch, "json")) as f:
        return json.load(f)


def step_records(workdir: str) -> list[dict]:
    """The training-step records of WORKDIR/metrics.jsonl (those with a `loss`; evaluations left out)."""
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if "loss" in r]


def eval_records(workdir: str) -> list[dict]:
    """The in-loop evaluation records of WORKDIR/metrics.jsonl (those with `eval/seconds`), in order."""
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if "eval/seconds" in r]


def figure(scratch_png: str, root: str, name: str) -> None:
    """Copies an ablation's comparison plot to docs/figures/NAME (the figure the docs show)."""
    with open(scratch_png, "rb") as f:
        data = f.read()
    files.write_bytes(os.path.join(root, "docs", "figures", name), data)
