"""The CLI in subprocesses: kill -9, SIGTERM and SIGINT (Ctrl-C) then resume, one-line errors.
Two processes on localhost: test_multihost.py."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from .test_pretrain_gpt_samples import write_megatron_run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOB = ["experiments.pretrain", "--config=configs/runs/tiny_resume.py"]
COMMAND = [sys.executable, "-m", *JOB]


def _env(compilation_cache, **extra):
    return dict(os.environ, JAX_COMPILATION_CACHE_DIR=compilation_cache, **extra)


def _last_step(workdir):
    try:
        with open(os.path.join(workdir, "metrics.jsonl")) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return 0
    return json.loads(lines[-1])["step"] if lines else 0


def _start(workdir, env):
    return subprocess.Popen(
        COMMAND + [f"--workdir={workdir}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _inode(workdir):
    try:
        return os.stat(os.path.join(workdir, "metrics.jsonl")).st_ino
    except FileNotFoundError:
        return None


def _signal_after_step(process, workdir, step, signum):
    """Sends `signum` once this process has rewritten metrics.jsonl (a resumed run first drops the lines after
    its checkpoint, replacing the file) and logged a step > `step`, or the run ended."""
    old_inode = _inode(workdir)
    while process.poll() is None and (_inode(workdir) == old_inode or _last_step(workdir) <= step):
        time.sleep(0.02)
    process.send_signal(signum)
    return process.wait(timeout=300)


@pytest.mark.slow(minutes=2)
def test_kill9_sigterm_and_sigint_then_resume_match_uninterrupted(
    uninterrupted, losses_of, compilation_cache, tmp_path
):
    workdir, env = str(tmp_path), _env(compilation_cache)
    _signal_after_step(_start(workdir, env), workdir, 4, signal.SIGKILL)
    killed_at = _last_step(workdir)
    assert killed_at < 12

    process = _start(workdir, env)
    resumed_from = max(int(s) for s in os.listdir(os.path.join(workdir, "checkpoints")) if s.isdigit())
    assert _signal_after_step(process, workdir, resumed_from, signal.SIGTERM) == 0, process.stderr.read()
    stopped_at = _last_step(workdir)
    steps = sorted(int(s) for s in os.listdir(os.path.join(workdir, "checkpoints")) if s.isdigit())
    assert steps[-1] == stopped_at  # SIGTERM: a checkpoint at the current step

    # Ctrl-C: a checkpoint at the current step, as SIGTERM, said at once and at the end, exit 130.
    process = _start(workdir, env)
    assert _signal_after_step(process, workdir, stopped_at, signal.SIGINT) == 130
    stderr = process.stderr.read()
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-2000:]
    interrupted_at = _last_step(workdir)
    said = [line for line in stderr.splitlines() if line.startswith("Ctrl-C: stopping after step ")]
    assert len(said) == 1 and said[0].endswith("press Ctrl-C again to stop at once"), stderr[-2000:]
    assert stderr.splitlines()[-1] == (
        f"interrupted: the checkpoint of step {interrupted_at} is saved; rerun the same command to continue"
    )
    steps = sorted(int(s) for s in os.listdir(os.path.join(workdir, "checkpoints")) if s.isdigit())
    assert steps[-1] == interrupted_at < 12

    final = subprocess.run(
        COMMAND + [f"--workdir={workdir}"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert final.returncode == 0, final.stderr[-2000:]
    resumed, reference = losses_of(workdir), losses_of(uninterrupted)
    assert [s for s, _ in resumed] == [s for s, _ in reference]
    # Bitwise in-process (test_loop.py). Across processes, 1 of 4 runs under heavy machine load differed by one
    # float32 ulp at one step (unexplained; not reproduced in 8 scripted runs), hence the ulp-level bound.
    np.testing.assert_allclose(
        [loss for _, loss in resumed], [loss for _, loss in reference], rtol=2e-7, atol=0
    )


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--config.train.bogus=1", "bogus"),
        ("--config.model.vocab_size=512", "error: tokenizer sentencepiece:demo_bpe1024"),
    ],
)
def test_cli_errors_are_one_line(flag, message, tmp_path, run_job):
    result = run_job(*JOB, f"--workdir={tmp_path}/w", flag)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if message in line]
    assert len(errors) == 1, result.stderr[-2000:]
    assert not os.path.exists(f"{tmp_path}/w/checkpoints")


@pytest.mark.parametrize("kind", ["under /proc", "file as parent"])
def test_unusable_workdir_fails_before_the_mesh_with_one_line(kind, tmp_path, run_job):
    """A workdir the run cannot create: one line naming it and the fix, exit 2, before devices start."""
    if kind == "under /proc":
        workdir = "/proc/apertus-workdir-test/run"
    else:
        (tmp_path / "file").write_text("not a directory")
        workdir = str(tmp_path / "file" / "run")
    result = run_job(*JOB, f"--workdir={workdir}")
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: workdir {workdir} "), result.stderr[-2000:]
    assert "--workdir=" in lines[0]
    assert os.listdir(tmp_path) in ([], ["file"])


SHORT = [  # tiny_resume for 4 steps, the LR schedule ending with them (no cooldown warning)
    "--config.train.steps=4",
    "--config.optim.warmup_tokens=256",
    "--config.optim.decay_tokens=256",
    "--config.optim.total_tokens=1024",
]


@pytest.mark.slow
def test_first_run_on_an_empty_cache_says_what_it_does_before_step_1(compilation_cache, tmp_path):
    """Every start-up phase that can take more than a couple of seconds has its line, in order: building the
    data (training the tokenizer within it), initializing the state, fetching and loading the evaluation data,
    compiling the step."""
    result = subprocess.run(
        COMMAND
        + SHORT
        + [f"--workdir={tmp_path}/w", "--config.eval.every_steps=4", "--config.eval.task_questions=5"],
        cwd=ROOT,
        env=_env(compilation_cache, APERTUS_JAX_CACHE=str(tmp_path / "empty_cache")),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    before_step_1 = result.stderr.split("step 1/4")[0]
    phases = [
        "data: building this process's batch source",
        "tokenizer: training the demo SentencePiece BPE",
        "data: ready in",
        "state: initializing the parameters",
        "eval: loading the held-out sets and the tasks ['german_exams_qa']",
        "fetching evals-3.0.1.post1-py3-none-any.whl from the package index (PyPI)",
        "questions; ready in",
        "train step: compiling for batches of 4 x 64 tokens",
        "train step: ready in",
    ]
    positions = [before_step_1.find(phase) for phase in phases]
    assert -1 not in positions, [p for p, i in zip(phases, positions) if i == -1]
    assert positions == sorted(positions)


@pytest.mark.slow
def test_corrupt_newest_checkpoint_is_one_warning_then_resumed(tmp_path, run_job, compilation_cache):
    """The newest checkpoint's array files cut short: one warning line on stderr (besides the INFO log), the
    run resumes from the previous checkpoint and ends. The resumed run is a process of its own: the traces of
    the other failed reads would come out at any time until it exits (`train.checkpoint`), and in this process
    pytest would collect them as warnings."""
    command = JOB + SHORT + [f"--workdir={tmp_path}/w"]
    first = run_job(*command)
    assert first.returncode == 0, first.stderr[-2000:]
    arrays = tmp_path / "w" / "checkpoints" / "4" / "params" / "ocdbt.process_0" / "d"
    for path in arrays.iterdir():
        path.write_bytes(path.read_bytes()[:100])
    env = _env(compilation_cache)
    second = subprocess.run(COMMAND + command[2:], cwd=ROOT, env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr[-2000:]
    not_info = [line for line in second.stderr.splitlines() if not line.startswith("I")]
    assert len(not_info) == 1 and not_info[0].startswith("W"), not_info
    assert "checkpoint 4 in" in not_info[0] and "is unreadable" in not_info[0]
    assert "resumed from step 2" in second.stderr
    assert _last_step(str(tmp_path / "w")) == 4


def test_a_missing_jsonl_file_stops_the_run_with_the_error_alone(tmp_path, run_job):
    """tiny_resume's component as a jsonl file that does not exist: the one error line alone on stderr (checked before the
    run logs its start-up lines), exit 2, no workdir."""
    config = tmp_path / "jsonl_run.py"
    config.write_text(
        "from configs.runs import tiny_resume\n\n\n"
        "def get_config():\n"
        "    config = tiny_resume.get_config()\n"
        "    with config.unlocked():\n"
        f"        config.data.pipeline.components = {{'demo': {{'kind': 'jsonl', 'paths': ['{tmp_path}/no.jsonl']}}}}\n"
        "    return config\n"
    )
    result = run_job("experiments.pretrain", f"--config={config}", f"--workdir={tmp_path}/w")
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [
        f"error: data.pipeline.components.demo: {tmp_path}/no.jsonl: no such file or directory"
    ]
    assert not os.path.exists(f"{tmp_path}/w")


def _start_megatron(config, workdir, env):
    command = [sys.executable, "-m", "experiments.pretrain", f"--config={config}", f"--workdir={workdir}"]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def _checkpoint_steps(workdir):
    return sorted(int(s) for s in os.listdir(os.path.join(workdir, "checkpoints")) if s.isdigit())


@pytest.mark.slow
def test_kill9_and_sigterm_on_a_megatron_dataset_resume_exactly(
    uninterrupted, losses_of, compilation_cache, tmp_path
):
    config_path, workdir = write_megatron_run(tmp_path), str(tmp_path / "run")
    env = _env(compilation_cache)
    _signal_after_step(_start_megatron(config_path, workdir, env), workdir, 4, signal.SIGKILL)
    assert _last_step(workdir) < 12
    process = _start_megatron(config_path, workdir, env)
    assert _signal_after_step(process, workdir, _checkpoint_steps(workdir)[-1], signal.SIGTERM) == 0, (
        process.stderr.read()
    )
    assert (
        _checkpoint_steps(workdir)[-1] == _last_step(workdir) < 12
    )  # SIGTERM: a checkpoint at the current step
    final = subprocess.run(
        [sys.executable, "-m", "experiments.pretrain", f"--config={config_path}", f"--workdir={workdir}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert final.returncode == 0, final.stderr[-2000:]
    recorded = open(os.path.join(workdir, "config.json")).read()
    assert '"kind": "megatron"' in recorded and str(tmp_path / "udhr") in recorded
    resumed, reference = losses_of(workdir), losses_of(uninterrupted)
    assert [s for s, _ in resumed] == [s for s, _ in reference] == list(range(1, 13))
    # As above: bitwise in-process, one float32 ulp allowed across processes under load.
    np.testing.assert_allclose(
        [loss for _, loss in resumed], [loss for _, loss in reference], rtol=2e-7, atol=0
    )


@pytest.mark.slow
def test_kill9_of_a_distilled_student_resumes_exactly(uninterrupted, losses_of, compilation_cache, tmp_path):
    """The student of the tiny resume run (one layer) distilled from that run: kill -9 after step 4, then a
    restart, gives the losses of an uninterrupted distillation (the teacher logits' position is the batch
    source's checkpointed state)."""
    from apertus_jax.config.schema import parse
    from apertus_jax.jobs import distill
    from configs.runs import tiny_resume

    config = tiny_resume.get_config()
    with config.unlocked():
        config.model.n_layers = 1
    student = parse(config)
    logits = str(tmp_path / "logits")
    distill.write_teacher_logits(uninterrupted, student, logits, steps=student.train.steps, k=16)
    reference = str(tmp_path / "reference")
    assert distill.distill(student, reference, logits, alpha=0.9, temperature=1.0) == "done"
    command = [sys.executable, "-m", "experiments.distill", "--config=configs/runs/tiny_resume.py"]
    command += ["--config.model.n_layers=1", f"--logits={logits}", f"--workdir={tmp_path / 'run'}"]
    env, workdir = _env(compilation_cache), str(tmp_path / "run")

    def start():
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    _signal_after_step(start(), workdir, 4, signal.SIGKILL)
    assert _last_step(workdir) < 12
    final = start()
    assert final.wait(timeout=300) == 0, final.stderr.read()[-2000:]
    resumed, expected = losses_of(workdir), losses_of(reference)
    assert [s for s, _ in resumed] == [s for s, _ in expected] == list(range(1, 13))
    # As above: bitwise in-process, one float32 ulp allowed across processes under load.
    np.testing.assert_allclose(
        [loss for _, loss in resumed], [loss for _, loss in expected], rtol=2e-7, atol=0
    )


@pytest.mark.slow
def test_a_second_ctrl_c_during_the_compile_stops_at_once_in_one_line(compilation_cache, tmp_path):
    """Ctrl-C twice while XLA compiles the step (a native call, where Python's own handlers wait): the first
    says at once what will happen, the second stops the process at once, exit 130, no crash; the rerun starts
    over (no checkpoint was written)."""
    workdir = str(tmp_path / "w")
    env = _env(str(tmp_path / "cache"))  # an empty XLA cache: the step compiles for seconds
    process = _start(workdir, env)
    lines = []
    for line in process.stderr:
        lines.append(line.rstrip("\n"))
        if "train step: compiling" in line:
            break
    process.send_signal(signal.SIGINT)
    for line in process.stderr:
        lines.append(line.rstrip("\n"))
        if line.startswith("Ctrl-C: "):
            break
    process.send_signal(signal.SIGINT)
    lines += process.stderr.read().splitlines()
    assert process.wait(timeout=120) == 130, lines[-20:]
    said = [line for line in lines if line.startswith("Ctrl-C")]
    assert said == [
        "Ctrl-C: stopping after step 1, whose train step compiles now, and saving it; press Ctrl-C again to "
        "stop at once",
        "Ctrl-C again: stopped at once (no checkpoint yet); rerun the same command to continue",
    ], lines[-20:]
    assert not any("Traceback" in line or "Fatal Python error" in line for line in lines), lines[-20:]
    assert not any(name.isdigit() for name in os.listdir(os.path.join(workdir, "checkpoints")))
