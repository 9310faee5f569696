"""The registered measurements behind the figures the docs quote, and the job that re-measures them.

    measure_all(REPO, ["demo"])  # = python -m experiments.measure --only demo

Each `Measurement` runs its documented command(s) in the repository, as a reader would, in a scratch
directory of its own, and returns its values; `measure_all` writes each one's `docs/results/NAME.json`
(`apertus_jax.jobs.results`) and then rewrites every bound figure of README.md and docs/ from the results
files. Values named in `deterministic` are the same in every fresh run on one machine (tests compare them
with a fresh run); the others (seconds, tokens/s) are of the machine and its load at the time.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from absl import logging

from apertus_jax.jobs import results

# The repository whose commands are run and whose docs are rewritten: the checkout this package is in.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass(frozen=True)
class Measurement:
    """A measurement: `measure(root, scratch)` runs `command` (the documented command(s), one per line) in the
    repository ROOT with its files under the empty directory `scratch` and returns {value name: value}."""

    command: str
    measure: Callable[[str, str], dict]
    deterministic: tuple[str, ...]


def _run(argv: list[str], root: str, env: dict[str, str], capture: bool = False) -> str:
    """Runs `argv` in ROOT with `env` added to this process's environment; its stdout if `capture` (else it
    goes to this process's stdout, as its stderr always does).

    Raises:
      ChildProcessError: it exited with a non-zero status.
    """
    done = subprocess.run(
        argv, cwd=root, env={**os.environ, **env}, stdout=subprocess.PIPE if capture else None, text=True
    )
    if done.returncode:
        raise ChildProcessError(
            f"`{' '.join(argv)}` exited with status {done.returncode} (its output is above)"
        )
    return done.stdout or ""


DEMO_VOCAB = 4096
# The documented time of training the demo BPE (README "Try it"), on its own in a fresh cache.
DEMO_BPE = (
    "import time; from apertus_jax.data.tokenizer import demo_tokenizer; "
    f"t = time.perf_counter(); demo_tokenizer({DEMO_VOCAB}); print(time.perf_counter() - t)"
)
DEMO_RUN = "python -m experiments.pretrain --config=configs/runs/tiny_demo.py --workdir=/tmp/apertus_demo"


def measure_demo(root: str, scratch: str) -> dict:
    """The README's "Try it" figures: the demo BPE's training time (a fresh cache), then the demo run in a fresh
    workdir with a fresh XLA cache (so its wall time includes compiling; the BPE and the exam questions come
    from the usual cache, trained or fetched there on first use).

    Returns:
      bpe_seconds; wall_seconds, user_seconds, system_seconds of the run's process; median_tokens_per_s over
      steps 2.. (step 1 includes compiling); the training losses (nats per token): first_loss, first10_mean,
      last20_mean, last20_median, final_loss.

    Raises:
      ChildProcessError: a command failed.
    """
    bpe_cache = os.path.join(scratch, "bpe_cache")
    bpe_seconds = float(_run([sys.executable, "-c", DEMO_BPE], root, {"APERTUS_JAX_CACHE": bpe_cache}, True))
    workdir = os.path.join(scratch, "apertus_demo")
    argv = [sys.executable, "-m", *DEMO_RUN.split()[2:-1], f"--workdir={workdir}"]
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    _run(argv, root, {"JAX_COMPILATION_CACHE_DIR": os.path.join(scratch, "xla")})
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        steps = [r for r in map(json.loads, f) if "loss" in r]
    losses = [r["loss"] for r in steps]
    return {
        "bpe_seconds": round(bpe_seconds, 2),
        "wall_seconds": round(wall, 1),
        "user_seconds": round(after.ru_utime - before.ru_utime, 1),
        "system_seconds": round(after.ru_stime - before.ru_stime, 1),
        "median_tokens_per_s": round(statistics.median(r["tokens_per_s"] for r in steps[1:]), 1),
        "first_loss": losses[0],
        "first10_mean": statistics.mean(losses[:10]),
        "last20_mean": statistics.mean(losses[-20:]),
        "last20_median": statistics.median(losses[-20:]),
        "final_loss": losses[-1],
    }


MEASUREMENTS = {
    "demo": Measurement(
        command=f"python -c '{DEMO_BPE}'  # APERTUS_JAX_CACHE=<fresh>\n{DEMO_RUN}",
        measure=measure_demo,
        deterministic=("first_loss", "first10_mean", "last20_mean", "last20_median", "final_loss"),
    ),
}


def selected(only: list[str] | None) -> list[str]:
    """The measurement names of `--only` (None or empty: all), in registry order.

    Raises:
      ValueError: an unknown name (the message lists the known ones).
    """
    unknown = sorted(set(only or ()) - set(MEASUREMENTS))
    if unknown:
        raise ValueError(f"--only: no measurement {', '.join(unknown)}; known: {', '.join(MEASUREMENTS)}")
    return [name for name in MEASUREMENTS if not only or name in only]


def _previous_seconds(root: str, name: str) -> float | None:
    try:
        return results.read_result(root, name).get("seconds")
    except FileNotFoundError:
        return None


def measure_all(root: str, names: list[str]) -> list[str]:
    """Runs the measurements `names` in turn, writes each one's results file as soon as it is done, then
    rewrites the bound figures of the documents under ROOT; logs each start with an ETA from the previous
    measurement times. Returns the documents rewritten.

    Raises:
      ChildProcessError: a measurement's command failed (the results files written before it stay).
      KeyError, FileNotFoundError, ValueError: a bound figure names a missing value or results file.
    """
    for index, name in enumerate(names):
        measurement = MEASUREMENTS[name]
        remaining = [_previous_seconds(root, n) for n in names[index:]]
        if None in remaining:
            eta = "ETA unknown (not measured before)"
        else:
            done_at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=sum(remaining))
            eta = f"last took {remaining[0]:.0f} s; all done about {done_at:%H:%M} UTC"
        logging.info("measure [%d/%d] %s (%s): %s", index + 1, len(names), name, eta, measurement.command)
        start_record, start = results.provenance(root), time.perf_counter()
        with tempfile.TemporaryDirectory(prefix=f"measure_{name}_") as scratch:
            values = measurement.measure(root, scratch)
        path = results.write_result(
            root, name, measurement.command, values, start_record, time.perf_counter() - start
        )
        logging.info("measure %s: wrote %s: %s", name, os.path.relpath(path, root), values)
    rewritten = results.rewrite_documents(root)
    logging.info("measure: rewrote %s", ", ".join(os.path.relpath(p, root) for p in rewritten) or "nothing")
    return rewritten
