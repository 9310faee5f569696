"""Every job in experiments/ through experiments/cli.py: a usage error is one line on stderr and exit status 2
(bad flags, config keys and paths, missing extras); --help, --config_fields and the log lines."""

import ast
import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).parents[2]
JOBS = sorted(p.stem for p in (ROOT / "experiments").glob("*.py") if p.stem not in ("__init__", "cli"))


# The line of tiny_own_data.py's `raise` without an argument (the error names its file and line).
OWN_DATA_RAISE = next(
    number
    for number, line in enumerate((ROOT / "configs/runs/tiny_own_data.py").read_text().splitlines(), 1)
    if line.strip() == "raise ValueError("
)


def test_every_job_is_listed():
    assert len(JOBS) >= 11 and "pretrain" in JOBS and "prepare_data" in JOBS


def test_jobs_and_test_workers_collect_garbage_at_the_package_thresholds():
    """Importing experiments/ (the first import of every job; tests/conftest.py's too) sets the collector's
    thresholds of the process, the youngest generation's above Python's default of 700."""
    import gc

    import experiments

    assert gc.get_threshold() == experiments.GC_THRESHOLDS and experiments.GC_THRESHOLDS[0] > 700


@pytest.mark.parametrize("job", JOBS)
def test_help_keeps_the_continued_lines_of_its_example_commands(job):
    """--help prints the job's docstring: each example line its source continues with a backslash keeps the
    backslash and the break there (a lone backslash in a plain string literal joins the two lines)."""
    source = (ROOT / "experiments" / f"{job}.py").read_text()
    docstring = ast.parse(source).body[0]
    continued = [line for line in source.splitlines()[: docstring.end_lineno] if line.endswith("\\")]
    shown = [line for line in docstring.value.value.splitlines() if line.endswith("\\")]
    assert len(shown) == len(continued), continued


@pytest.mark.parametrize("job", JOBS)
def test_bad_flag_is_one_line_and_exit_2(job, run_job):
    result = run_job(f"experiments.{job}", "--no_such_flag=1")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-2000:]
    # argparse names missing required arguments first, absl the unknown flag: either way one line.
    assert len(lines) == 1 and lines[0].startswith("error: "), lines


def test_usage_error_raised_in_main_is_one_line(run_job):
    """absl's app.UsageError (raised by a job's main) would print the whole help and exit 1."""
    result = run_job("experiments.memory_plan", "--meshes=3x")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr[
        -2000:
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--config=configs/runs/tiny_demo.py", "--config.train.lr=abc"],
            "error: unknown config key train.lr; did you mean --config.optim.peak_lr?",
        ),
        (
            ["--config=configs/runs/tiny_dmeo.py"],
            f"error: --config=configs/runs/tiny_dmeo.py: configs/runs/tiny_dmeo.py is not a file here nor "
            f"under {ROOT}; did you mean configs/runs/tiny_demo.py or "
            f"configs/runs/tiny_resume.py? the repository's configs are in "
            f"{ROOT}/configs/",
        ),
        (  # the line that the schedule follows the steps is not logged for a config that is refused
            ["--config=configs/runs/tiny_demo.py", "--config.train.steps=20", "--config.model.n_layers=0"],
            "error: --config.model.n_layers must be a positive integer, got 0",
        ),
        (
            ["--config=configs/runs/tiny_demo.py:bogus"],
            "error: --config=configs/runs/tiny_demo.py:bogus: configs/runs/tiny_demo.py takes no argument; "
            "drop ':bogus'",
        ),
        (
            ["--config=configs/runs/tiny_own_data.py"],
            f"error: configs/runs/tiny_own_data.py:{OWN_DATA_RAISE}: ValueError: this config needs your shard set: "
            "--config=configs/runs/tiny_own_data.py:/path/to/shards (experiments.tokenize_data --out)",
        ),
    ],
)
def test_config_errors_name_the_fix_in_one_line(args, message, tmp_path, run_job):
    """An unknown key points to the closest key of any section; a missing config file is named as missing."""
    result = run_job("experiments.pretrain", *args, f"--workdir={tmp_path}/w")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith(message), result.stderr[-2000:]
    assert not os.path.exists(tmp_path / "w")


@pytest.mark.parametrize(
    "job, config, where",
    [
        ("pretrain", "configs/runs/tiny_demo.py", "apertus_jax/config/schema.py"),
        ("prepare_data", "configs/prep/demo.py", "configs/prep/demo.py"),
    ],
)
def test_an_unknown_key_points_to_where_the_keys_of_its_config_are(job, config, where, tmp_path, run_job):
    """A run config's keys are the schema's; a preparation config's are its file's."""
    result = run_job(f"experiments.{job}", f"--config={config}", "--config.nosuch=1", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"error: unknown config key nosuch (the keys: {where})"
    ], result.stderr[-2000:]
    assert not list(tmp_path.iterdir())


def test_unknown_key_of_a_default_study_config_points_to_its_schema(run_job):
    """Overrides of a script's default config file (no --config=) are parsed when the flag is defined."""
    result = run_job("experiments.memorization", "--config.run.train.stepz=3")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith(
        "error: unknown config key run.train.stepz; did you mean --config.run.train.steps"
    )


@pytest.mark.parametrize(
    "module, args, absent, extra",
    [
        ("experiments.tokenize_data", ["--help"], "datatrove", "prep"),
        ("experiments.tokenize_data", ["--input=x.jsonl", "--tokenizer=demo"], "datatrove", "prep"),
        ("experiments.prepare_data", ["--config=configs/prep/demo.py"], "datatrove", "prep"),
        ("experiments.fetch_robots", ["--domains=d.txt", "--out=r.jsonl"], "protego", "prep"),
        ("experiments.lm_eval", ["run", "--model", "apertus_jax"], "lm_eval", "eval"),
    ],
)
def test_a_command_without_its_extra_is_one_line_naming_it_and_exit_2(
    module, args, absent, extra, tmp_path, run_job
):
    """The extra's package missing (simulated: a None entry in sys.modules makes it unfindable): one line
    naming the extra and its install command, exit 2, nothing written (run in an empty directory)."""
    result = run_job(module, *args, cwd=tmp_path, missing=[absent])
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert f"needs the '{extra}' extra ({absent} is not installed)" in lines[0]
    assert f'pip install -e ".[{extra}]"' in lines[0]
    assert not list(tmp_path.iterdir())


def test_the_ray_executor_without_ray_is_one_line_and_writes_nothing(tmp_path, run_job):
    """prepare_data's Ray executor with `ray` missing (simulated as above): one line, exit 2, no work_dir."""
    args = ["--config=configs/prep/demo.py", "--config.executor.kind=ray", f"--config.work_dir={tmp_path}/w"]
    result = run_job("experiments.prepare_data", *args, missing=["ray"])
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "error: --config.executor.kind=ray needs ray, not installed here: pip install ray"
    ], result.stderr[-2000:]
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    "override, message",
    [
        ("workers=0", "executor.workers must be -1 (one per task) or at least 1, got 0"),
        ("tasks=0", "executor.tasks must be at least 1, got 0"),
        ("kind=spark", "executor kind 'spark' unknown; use one of ('local', 'slurm', 'ray')"),
    ],
)
def test_a_bad_executor_setting_is_one_line_and_writes_nothing(override, message, tmp_path, run_job):
    args = [
        "--config=configs/prep/demo.py",
        f"--config.executor.{override}",
        f"--config.work_dir={tmp_path}/w",
    ]
    result = run_job("experiments.prepare_data", *args)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [f"error: {message}"], (
        result.stderr[-2000:]
    )
    assert not (tmp_path / "w").exists()


def test_a_repository_config_path_works_from_any_directory(tmp_path, run_job):
    """`--config=configs/...` from outside the checkout names the repository's file: the run gets as far as
    the config's values (here a bad override: one line, exit 2)."""
    args = ["--config=configs/runs/tiny_demo.py", "--config.train.steps=0", f"--workdir={tmp_path}/w"]
    result = run_job("experiments.pretrain", *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [
        "error: --config.train.steps must be a positive integer, got 0"
    ]


@pytest.mark.parametrize(
    "job, args, message",
    [
        (
            "ablate",
            ["--config=configs/ablations/tiny.py", "--variants=nope"],
            "error: --variants: unknown ['nope']",
        ),
        (
            "ablate",
            ["--config=configs/ablations/tny.py"],
            "error: --config=configs/ablations/tny.py: configs/ablations/tny.py is not a file here nor under "
            f"{ROOT}; did you mean configs/ablations/tiny.py",
        ),
        (
            "ablate",
            ["--config=configs/ablations/tiny.py", "--config.train.steps=4"],
            "error: Unknown command line flag 'config.train.steps': this command sets a config key with "
            "--set=train.steps=VALUE",
        ),
        (
            "long_context",
            ["--config=configs/runs/tiny_long_contxt.py", "--init_from=p"],
            "error: --config=configs/runs/tiny_long_contxt.py: configs/runs/tiny_long_contxt.py is not a file "
            f"here nor under {ROOT}; did you mean configs/runs/tiny_long_context.py",
        ),
    ],
)
def test_jobs_that_load_their_own_config_file_find_it_from_any_directory(
    job, args, message, tmp_path, run_job
):
    """The ablation and long-context files are found as a run config is (`cli.config_file`): from outside
    the checkout the ablation gets as far as its variants; a misspelled path names the closest files; a
    `--config.KEY` override of the ablation names its `--set=KEY`."""
    result = run_job(f"experiments.{job}", *args, f"--workdir={tmp_path}/w", cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith(message), result.stderr[-2000:]
    assert not list(tmp_path.iterdir())
    assert os.listdir(tmp_path) == []


RUN_CONFIG_JOBS = ["pretrain", "sft", "qrpo", "pretrain_gpt_samples", "memory_plan"]


@pytest.mark.parametrize("job", [*RUN_CONFIG_JOBS, "memorization", "long_context", "ablate"])
def test_help_of_a_training_command_shows_config_and_how_to_override(job, run_job):
    result = run_job(f"experiments.{job}", "--help")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "  --config: " in result.stdout, result.stdout
    if job in RUN_CONFIG_JOBS:
        assert "--config.KEY=VALUE" in result.stdout and "--[no]config_fields" in result.stdout


def test_config_fields_lists_the_schema_with_the_overridden_values(run_job):
    """`--config_fields` prints the listing of the config with its overrides (the preset's model section and
    the schedule fitted to the overridden steps included) and exits 0 before anything runs."""
    from apertus_jax.config.fields import config_fields, format_fields
    from apertus_jax.config.schema import apply_preset_override, fit_schedule_to_steps
    from configs.runs import tiny_demo

    overrides = ["--config.train.steps=20", "--config.model.preset=tiny-llama"]
    result = run_job(
        "experiments.pretrain", "--config=configs/runs/tiny_demo.py", *overrides, "--config_fields"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    config = tiny_demo.get_config()
    config.train.steps = 20
    config.model.preset = "tiny-llama"
    apply_preset_override(config, overrides)
    fit_schedule_to_steps(config, ["train.steps"])
    assert result.stdout.strip() == format_fields(config_fields(config))
    assert "--config.model.mlp_type='swiglu'" in result.stdout
    assert "--config.optim.total_tokens=40960" in result.stdout  # 20 steps of 2,048 tokens


@pytest.mark.parametrize(
    "flag, prefix",
    [
        ([], r"I \d\d:\d\d:\d\d "),
        (["--log_format=absl"], r"I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ cli\.py:\d+\] "),
    ],
)
def test_log_lines_carry_a_short_prefix_or_absl_s_behind_a_flag(flag, prefix, run_job):
    """The line that says the schedule follows an overridden step count, as the log prints it."""
    result = run_job("experiments.pretrain", "--config.train.steps=20", "--config_fields", *flag)
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.fullmatch(
        prefix + r"train\.steps=20 overridden without the schedule: .*", result.stderr.strip()
    )


@pytest.mark.parametrize(
    "job, args, flag",
    [
        ("goldfish_study", [], "--out"),
        ("goldfish_formats", [], "--out"),
        ("memorization", [], "--out"),
        ("distill_study", ["--teacher=workdir/teacher"], "--out"),
        ("export_hf", ["--workdir=workdir/tiny_demo"], "--out"),
        ("tokenizer_fairness", ["--languages=eng,fra", "--bpe_vocab_size=0"], "--out"),
        ("lm_eval_task", [], "--output_dir"),
        (
            "long_context",
            ["--config=configs/runs/tiny_long_context.py", "--init_from=workdir/pretrain"],
            "--workdir",
        ),
        ("fetch_robots", ["--domains=domains.txt"], "--out"),
        ("gpt_samples", ["--data_path=workdir/meg", "--num_samples=10"], "--out"),
    ],
)
def test_an_output_folder_under_a_file_is_refused_before_the_study_trains(job, args, flag, tmp_path, run_job):
    """The studies (and the export, the reports, the fetch) write their results at the end: an output path that
    cannot be created is one line naming the flag and exit 2 at the start, not after minutes of training (or a
    raw errno naming no flag; gpt_samples printed its summary first)."""
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "study"
    result = run_job(f"experiments.{job}", *args, f"{flag}={out}", cwd=tmp_path)
    name = "workdir" if flag == "--workdir" else flag
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"error: {name} {out} cannot be created: {tmp_path / 'afile'} is a file, not a directory; "
        f"pass {flag}= a directory you can write (or fix its permissions / mount)"
    ], result.stderr[-2000:]
    assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_a_comparison_under_a_file_is_refused_before_the_runs_are_read(tmp_path, run_job):
    """Before: `error: [Errno 17] File exists: '.../afile'`, naming no flag."""
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "cmp"
    result = run_job("experiments.compare_runs", str(tmp_path / "runs"), f"--out={out}", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"error: --out {out}.md cannot be created: {tmp_path / 'afile'} is a file, not a directory; "
        "pass --out= a directory you can write (or fix its permissions / mount)"
    ], result.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


@pytest.mark.parametrize(
    "job, args, message",
    [
        ("goldfish_formats", ["--k=abc"], "flag --k=abc: give comma-separated integers, e.g. 4,50"),
        ("goldfish_formats", ["--h=4,x"], "flag --h=4,x: give comma-separated integers, e.g. 4,50"),
        (
            "fetch_robots",
            ["--threads=0", "--domains=domains.txt"],
            "flag --threads=0: 0 is not a positive integer",
        ),
    ],
)
def test_a_malformed_number_is_one_line_naming_its_flag(job, args, message, tmp_path, run_job):
    """Before: `invalid literal for int() with base 10: 'abc'` and `max_workers must be greater than 0`, no flag
    named (cli.define_integer_list; absl's lower_bound)."""
    result = run_job(f"experiments.{job}", *args, f"--out={tmp_path}/out", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"error: {message} (see --helpshort)"
    ], result.stderr[-2000:]
    assert not list(tmp_path.iterdir())


def test_a_config_file_without_get_config_is_named_as_such(tmp_path, run_job):
    """Before: `unknown config key: module config_config has no attribute get_config`: no key was unknown, and
    config_config is not the file's name."""
    (tmp_path / "nofn.py").write_text("X = 1\n")
    result = run_job(
        "experiments.pretrain", f"--config={tmp_path / 'nofn.py'}", f"--workdir={tmp_path / 'w'}"
    )
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"error: --config={tmp_path / 'nofn.py'}: {tmp_path / 'nofn.py'} defines no get_config(); a config file "
        "defines get_config() returning its config (e.g. configs/runs/tiny_demo.py)"
    ], result.stderr[-2000:]
    assert not (tmp_path / "w").exists()  # (importing the file may write its __pycache__ beside it)


@pytest.mark.parametrize(
    "override, named",
    [
        ((), "config.data.pipeline.components.udhr"),  # the file's value: no flag sets it
        (("--config.data.pipeline.components.udhr.weight=0.3x",), "--config.data.pipeline.components.udhr"),
    ],
)
def test_a_bad_value_is_named_as_the_file_s_or_as_the_flag_that_set_it(override, named, tmp_path, run_job):
    """Before: a bad value written in the config file was named as a flag the user never gave, `--config.X`."""
    (tmp_path / "mine.py").write_text(
        "from configs.runs import tiny_demo\n\n\ndef get_config():\n    config = tiny_demo.get_config()\n"
        "    with config.unlocked():\n        config.data.pipeline.components.udhr = dict(kind='demo', "
        "sources=['udhr'], weight='0.2x')\n    return config\n"
    )
    result = run_job(
        "experiments.pretrain", f"--config={tmp_path / 'mine.py'}", *override, f"--workdir={tmp_path / 'w'}"
    )
    value = "0.3x" if override else "0.2x"
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"error: {named}: weight must be a number, got '{value}'"
    ], result.stderr[-2000:]
    assert not (tmp_path / "w").exists()


# A user's config file of the tiny demo with one mistake, the line of each that fails, and what it raised.
BROKEN_CONFIGS = {
    "value": ("config.train.steps = int('thirty')", 7, "ValueError: invalid literal for int() with base 10: 'thirty'"),
    "name": ("config.train.steps = foo", 7, "NameError: name 'foo' is not defined"),
    "locked": ("config.train.stepz = 3", 7, 'AttributeError: Key "stepz" does not exist and cannot be added'),
    "import": ("from configs.runs.tiny_demoo import get_config", 1, "ModuleNotFoundError: No module named 'configs.runs.tiny_demoo'"),
    "syntax": ("if True", 7, "SyntaxError: expected ':'"),
}  # fmt: skip


def broken_config(mistake: str) -> str:
    """configs/runs/tiny_demo.py's run with the line `mistake` in get_config (an import goes to the top)."""
    head = mistake if mistake.startswith("from ") else "from configs.runs import tiny_demo"
    body = "" if mistake.startswith("from ") else f"    {mistake}\n"
    return f"{head}\n\n\ndef get_config():\n    config = tiny_demo.get_config()\n\n{body}    return config\n"


@pytest.mark.parametrize("name", BROKEN_CONFIGS)
def test_an_exception_raised_in_a_config_file_is_one_line_naming_its_file_and_line(name, tmp_path, run_job):
    """Before: a ValueError was one line without file or line (`error: invalid literal for int() ...`), a
    NameError, an import or a syntax error a traceback and exit status 1. The file is named as given, relative
    to the working directory (here the folder that holds it)."""
    mistake, line, message = BROKEN_CONFIGS[name]
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "mine.py").write_text(broken_config(mistake))
    result = run_job("experiments.pretrain", "--config=configs/mine.py", "--workdir=w", cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith(f"error: configs/mine.py:{line}: {message}"), lines
    assert not (tmp_path / "w").exists()


def test_a_config_file_that_needs_an_argument_says_how_to_give_it(tmp_path, run_job):
    (tmp_path / "staged.py").write_text("def get_config(stage):\n    return None\n")
    result = run_job("experiments.pretrain", "--config=staged.py", "--workdir=w", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "error: --config=staged.py: staged.py takes an argument; give it as --config=staged.py:ARG"
    ], result.stderr[-2000:]


def test_an_ablation_file_that_raises_is_one_line_naming_its_file_and_line(tmp_path, run_job):
    """The commands that load their config file themselves (experiments.ablate, experiments.long_context) go
    through the same loader."""
    (tmp_path / "ablation.py").write_text("def get_ablation():\n    return dict(base=baes)\n")
    result = run_job("experiments.ablate", "--config=ablation.py", "--workdir=w", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "error: ablation.py:2: NameError: name 'baes' is not defined"
    ], result.stderr[-2000:]
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    "job, module, function, args",
    [
        ("pretrain", "apertus_jax.jobs.pretrain", "pretrain", []),
        ("sft", "apertus_jax.jobs.posttrain", "sft", []),
        ("qrpo", "apertus_jax.jobs.posttrain", "qrpo", []),
        (
            "pretrain_gpt_samples",
            "apertus_jax.jobs.gpt_samples",
            "pretrain_on_gpt_samples",
            ["--data_path=unread"],
        ),
        ("distill", "apertus_jax.jobs.distill", "distill", ["--logits=unread"]),
    ],
)
def test_a_training_command_ends_with_the_run_s_status_line(
    job, module, function, args, tmp_path, monkeypatch, run_job
):
    """The job's function stands in for the training; before, distill ended with 'distill done: WORKDIR'."""
    import importlib

    monkeypatch.setattr(importlib.import_module(module), function, lambda *a, **k: "done")
    result = run_job(f"experiments.{job}", f"--workdir={tmp_path / 'run'}", *args)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == f"run done: {tmp_path / 'run'}\n"
