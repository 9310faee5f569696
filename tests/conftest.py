"""Test-wide settings and the trainer fixtures every package's tests share.

8 virtual CPU devices so mesh tests run on one machine, and XLA:CPU set to compile fast (`COMPILE_FLAGS`,
`apertus_jax.aot.fast_compile`): the tests compile hundreds of tiny programs whose run time is negligible; a
program's machine code in one piece is also not split for threads that the other test worker keeps busy
(with tests/train/test_step.py, 29.5 s -> 26.4 s on 2 cores). The test processes that the tests start compile
likewise. XLA reads the flags when jax initializes its backend, so they are set before any test imports jax.

`train(config, workdir)` runs a config file's ConfigDict as `experiments.pretrain` does; `uninterrupted` is the
reference run of every resume test. `run_job` runs a command of experiments/ in this process, as its subprocess
would run. `write_tiny_workdir` writes a trained workdir of a tiny model as the trainer does; `hf_dir` is a tiny
exported HF checkpoint and `exams_task_dir` a local German exams task for lm-eval.
"""

import contextlib
import dataclasses
import functools
import io
import json
import logging as std_logging
import os
import pathlib
import runpy
import subprocess
import sys

from apertus_jax.aot.fast_compile import fast_compile_flags  # noqa: E402  (imports no jax)

COMPILE_FLAGS = fast_compile_flags()
XLA_FLAGS = f"--xla_force_host_platform_device_count=8 {COMPILE_FLAGS}"
os.environ.setdefault("XLA_FLAGS", XLA_FLAGS)
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import pytest  # noqa: E402

import experiments  # noqa: E402, F401  (the jobs' garbage-collector thresholds in the test workers as well)
from apertus_jax.models import create_model, get_config  # noqa: E402


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
    from apertus_jax.config.schema import parse
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


# The committed exams extract of the evaluation tests (tests/eval/assets/README.md).
EXAMS_EXTRACT = pathlib.Path(__file__).parent / "eval" / "assets" / "german_exams_qa_first20.jsonl"


def write_tiny_workdir(
    workdir: str,
    step: int,
    init_std: float | None = None,
    tokenizer: str = "demo",
    vocab_size: int = 1024,
    posttrain_data: tuple[str, ...] = (),
) -> dict:
    """Writes a workdir as the trainer does (config.json + an Orbax checkpoint at `step`, the trainer's own
    assembly and checkpointer, and the provenance record its hook writes at start-up, nothing consumed) of a
    tiny model with the 1,024-id demo BPE (or `tokenizer` with `vocab_size` ids; `posttrain_data` makes it
    a post-training run's workdir); returns its parameters."""
    from apertus_jax.config.schema import base_config, parse
    from apertus_jax.models.presets import model_section
    from apertus_jax.train.batches import Prefetcher
    from apertus_jax.train.checkpoint import Checkpointer, tree_shapes
    from apertus_jax.train.run import Run

    config = base_config()
    config.model = model_section(
        "tiny",
        vocab_size=vocab_size,
        d_model=32,
        n_heads=4,
        n_kv_heads=2,
        head_dim=8,
        mlp_hidden=64,
        max_seq_len=64,
    )
    if init_std is not None:
        config.model.init_std = init_std
    config.data.demo_tokenizer_vocab = 1024
    config.data.tokenizer = tokenizer
    config.posttrain.data = list(posttrain_data)
    config.data.seq_len = 64
    config.train.batch_plan = ((0, 8 * 64),)
    config.seed, config.mesh.data = 5, 1
    parsed = parse(config)
    with open(os.path.join(workdir, "config.json"), "w") as f:
        json.dump(parsed.to_dict(), f)
    run = Run(parsed, devices=jax.devices()[:1])
    state = run.spec.init()
    checkpointer = Checkpointer(os.path.join(workdir, "checkpoints"), keep=2, async_save=False)
    checkpointer.save(
        step,
        state,
        Prefetcher(run.batch_source(), 0),  # the data state as the loop saves it
        {"progress": {"step": step}, "param_shapes": tree_shapes(state["params"])},
    )
    checkpointer.close()
    record = {"step": step, "tokenizer": {"name": run.tokenizer.name, "checksum": run.tokenizer.checksum}}
    record.update(tokens_consumed={}, tokens_consumed_total=0, components={})
    with open(os.path.join(workdir, "provenance.json"), "w") as f:
        json.dump(record, f)
    return jax.device_get(state["params"])


def truncated_hf_copy(directory: str, into: pathlib.Path) -> pathlib.Path:
    """`into` made a copy of the HF checkpoint `directory` whose `model.safetensors` is cut short at its half
    (a copy broken off), its other files linked; returns `into`."""
    into.mkdir(exist_ok=True)
    for name in os.listdir(directory):
        if name != "model.safetensors":
            os.link(os.path.join(directory, name), into / name)
    whole = pathlib.Path(directory, "model.safetensors").read_bytes()
    (into / "model.safetensors").write_bytes(whole[: len(whole) // 2])
    return into


@pytest.fixture(scope="session")
def hf_dir(tmp_path_factory):
    """A tiny Llama checkpoint exported by `save_hf`, with a 512-id byte-level BPE of the demo corpus."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    from apertus_jax.data import demo_corpus
    from apertus_jax.models.hf import save_hf

    directory = tmp_path_factory.mktemp("hf")
    texts = [d["text"] for d in demo_corpus.load_demo_documents("train")][:300]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    specials = ["<unk>", "<s>", "</s>", "<pad>"]
    bpe.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=512, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    # transformers' add_special_tokens=True (lm-eval's add_bos_token=True) then prepends <s>.
    bpe.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    config = get_config("tiny-llama", vocab_size=512, d_model=64, head_dim=16, mlp_hidden=128, init_std=0.1)
    save_hf(create_model(config, seed=3), directory)
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    ).save_pretrained(directory)
    assert json.loads((directory / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    return str(directory)


@pytest.fixture(scope="session")
def exams_task_dir(tmp_path_factory):
    """A local lm-eval task `german_exams_qa` over the committed first 20 questions."""
    from apertus_jax.eval.lm_eval_tasks import write_multiple_choice_task
    from apertus_jax.eval.tasks import parse_exams_qa_lines

    directory = tmp_path_factory.mktemp("tasks")
    questions = parse_exams_qa_lines(
        EXAMS_EXTRACT.read_text(encoding="utf-8").splitlines(), "german-exams-qa"
    )
    write_multiple_choice_task(str(directory), "german_exams_qa", questions)
    return str(directory)


@pytest.fixture(scope="session")
def teacher_logits_store(tmp_path_factory):
    """(teacher workdir, student config, logits dir of 3 steps): a tiny teacher, a one-layer student, the
    teacher's top 8 (`apertus_jax.jobs.distill.write_teacher_logits`)."""
    from apertus_jax.jobs.distill import write_teacher_logits
    from apertus_jax.trained.workdir import read_config

    teacher = str(tmp_path_factory.mktemp("teacher"))
    write_tiny_workdir(teacher, 3, init_std=0.5)
    config = read_config(teacher)
    student = config.replace(
        model=dataclasses.replace(config.model, n_layers=1),
        train=dataclasses.replace(config.train, steps=3),
        mesh=dataclasses.replace(config.mesh, data=-1),
    )
    logits_dir = str(tmp_path_factory.mktemp("logits"))
    meta = write_teacher_logits(teacher, student, logits_dir, steps=3, k=8)
    assert meta["k"] == 8 and meta["steps"] == 3
    return teacher, student, logits_dir
