"""Test-wide settings and the trainer fixtures every package's tests share.

8 virtual CPU devices so mesh tests run on one machine, and XLA:CPU set to compile fast (`COMPILE_FLAGS`): the
tests compile hundreds of tiny programs whose run time is negligible. With LLVM's optimizations off
(`--xla_backend_optimization_level=0`) XLA:CPU compiles them about twice as fast (the tiny resume run's train
step: 7.0 s -> 3.4 s on 2 cores), and with its older fusion emitters instead of the MLIR ones
(`--xla_cpu_use_fusion_emitters=false`) a third faster again (tests/train/test_loss.py and
tests/models/test_attention.py: 34 s -> 22 s on 2 cores); a program's machine code is generated in one piece,
not split for threads that the other test worker keeps busy (`--xla_cpu_parallel_codegen_split_count=1`:
with tests/train/test_step.py, 29.5 s -> 26.4 s). The test processes that the tests start compile likewise.
XLA reads the flags when jax initializes its backend, so they are set before any test imports jax.

`train(config, workdir)` runs a config file's ConfigDict as `experiments.pretrain` does; `uninterrupted` is the
reference run of every resume test. `run_job` runs a command of experiments/ in this process, as its subprocess
would run.
"""

import contextlib
import functools
import io
import logging as std_logging
import os
import pathlib
import runpy
import subprocess
import sys

COMPILE_FLAGS = (
    "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false "
    "--xla_cpu_parallel_codegen_split_count=1"
)
XLA_FLAGS = f"--xla_force_host_platform_device_count=8 {COMPILE_FLAGS}"
os.environ.setdefault("XLA_FLAGS", XLA_FLAGS)
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest  # noqa: E402

import experiments  # noqa: E402, F401  (the jobs' garbage-collector thresholds in the test workers as well)


@pytest.hookimpl(tryfirst=True)  # before xdist's worker appends the groups to the test ids
def pytest_collection_modifyitems(items):
    """The tests of a file that share a module-scoped fixture (a trained workdir, an export) go to one xdist
    worker, so that the fixture is built once (`pytest.ini`: `--dist loadgroup`); the others are handed out one
    by one. The `slow` tests (seconds to minutes each) first, so that the two workers start on them and the short
    tests fill the gaps, rather than one worker running them alone at the end (`-n 2`); the longest, marked
    `slow(minutes=N)` with their rough CI minutes, before the other slow ones. (xdist's default `--dist load`
    would give each worker a quarter of its share in one first chunk: nearly every slow test to the first
    worker.)"""
    for item in items:
        definitions = getattr(item, "_fixtureinfo", None)
        scopes = {
            d.scope for defs in (definitions.name2fixturedefs.values() if definitions else ()) for d in defs
        }
        if scopes & {"module", "class", "package"}:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    items.sort(key=lambda item: -_slow_minutes(item))


def _slow_minutes(item) -> float:
    """The rough CI minutes of a test: its `slow(minutes=N)`, 0.1 for another slow test, 0 for a quick one."""
    mark = item.get_closest_marker("slow")
    return mark.kwargs.get("minutes", 0.1) if mark else 0


def train(config, workdir: str) -> str:
    """The run of a config file's ConfigDict as `experiments.pretrain` trains it: parsed, with the standard
    hooks (config and provenance records, in-loop evaluation)."""
    from apertus_jax.jobs.config import parse
    from apertus_jax.jobs.pretrain import pretrain

    return pretrain(parse(config), workdir)


@pytest.fixture(scope="session", autouse=True)
def compilation_cache(tmp_path_factory):
    """A persistent XLA cache shared by this session's in-process runs, subprocesses and xdist workers: each
    train step compiles once (a restarted run reuses it, as a resumed job does with the CLI's cache). A worker
    that reads an entry the other is still writing gets a warning from jax and compiles it itself."""
    import jax

    if os.environ.get("PYTEST_XDIST_WORKER"):  # the workers' base folders share a parent
        path = str(tmp_path_factory.getbasetemp().parent / "xla_cache")
        os.makedirs(path, exist_ok=True)
    else:
        path = str(tmp_path_factory.mktemp("xla_cache"))
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    return path


# The tests' tiny Apertus: 2 layers, width 32, over UTF-8 bytes unless `vocab_size` says otherwise.
TINY_MODEL = dict(vocab_size=256, d_model=32, n_heads=2, n_kv_heads=1, head_dim=16, mlp_hidden=64)


@functools.cache
def _tiny_model(seed: int = 0, **fields):
    import jax

    from apertus_jax.models import partitioning
    from apertus_jax.models.presets import get_config
    from apertus_jax.train.train_state import make_abstract_params

    config = get_config("tiny", **{**TINY_MODEL, **fields})
    spec = make_abstract_params(config, partitioning.make_mesh(1, 1, 1, jax.devices()[:1]), seed)
    return spec, spec.create()


@pytest.fixture(scope="session")
def tiny_model():
    """`tiny_model(seed=0, **model fields)` -> (its `AbstractParams` on one device: apply_fn, hidden_fn; its
    parameters as a plain dict): the model of the step, loss and objective tests (`TINY_MODEL` fields)."""
    return _tiny_model


def _read_metrics(workdir: str) -> list[dict]:
    """The records of WORKDIR/metrics.jsonl."""
    import json
    import os

    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="session")
def read_records():
    """workdir -> the records of its metrics.jsonl."""
    return _read_metrics


@pytest.fixture(scope="session")
def losses_of():
    """workdir -> [(step, loss), ...] from its metrics.jsonl."""
    return lambda workdir: [(r["step"], r["loss"]) for r in _read_metrics(workdir)]


@pytest.fixture(scope="session")
def uninterrupted(tmp_path_factory):
    """An uninterrupted in-process run of configs/runs/tiny_resume.py: the reference for every resume test."""
    from configs.runs import tiny_resume

    workdir = str(tmp_path_factory.mktemp("uninterrupted"))
    assert train(tiny_resume.get_config(), workdir) == "done"
    return workdir


ROOT = pathlib.Path(__file__).parents[1]


_RETIRED_CLI_MODULES = []


def _run_job(module: str, *args, cwd=ROOT) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS...` run in this process: its exit status, stdout and stderr (the absl log
    included). absl keeps a process's flags and its one-time start in globals: the job's flags are removed
    and absl's start is made to run again, so that jobs run one after another as separate processes do."""
    from absl import app, flags, logging

    app.define_help_flags()
    known = set(flags.FLAGS)
    handler = logging.get_absl_handler().python_handler
    saved = sys.argv[:], os.getcwd(), handler.stream, handler.formatter, std_logging.root.level
    sys.argv[:] = [module.rpartition(".")[2], *map(str, args)]
    os.chdir(cwd)
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            handler.stream = err
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    finally:
        sys.argv[:], cwd, handler.stream, formatter, level = saved
        os.chdir(cwd)
        handler.setFormatter(formatter)
        std_logging.root.setLevel(level)
        for name in set(flags.FLAGS) - known:
            delattr(flags.FLAGS, name)
        flags.FLAGS.unparse_flags()
        app._run_init.done = app._register_and_parse_flags_with_usage.done = False
        # experiments.cli holds per-job globals (which --config the job defined): the next job imports it anew.
        # The old module stays alive: absl knows the modules that disclaim their flags by id(), and a freed id
        # reused by a later job's __main__ would make that job's flags no flags of its own (missing in --help).
        if "experiments.cli" in sys.modules:
            _RETIRED_CLI_MODULES.append(sys.modules.pop("experiments.cli"))
        if "experiments" in sys.modules:
            vars(sys.modules["experiments"]).pop("cli", None)
    return subprocess.CompletedProcess([module, *map(str, args)], code, out.getvalue(), err.getvalue())


@pytest.fixture
def run_job(monkeypatch):
    """`run_job(module, *args, cwd=ROOT, env={}, missing=())` -> subprocess.CompletedProcess: the command
    `python -m module args...` run in this process (`_run_job`), with `env` set and the packages `missing`
    made unimportable (as if their extra were not installed)."""

    def run(module: str, *args, cwd=ROOT, env=None, missing=()) -> subprocess.CompletedProcess:
        with monkeypatch.context() as patch:
            for name, value in (env or {}).items():
                patch.setenv(name, value)
            for name in missing:
                patch.setitem(sys.modules, name, None)
            return _run_job(module, *args, cwd=cwd)

    return run
