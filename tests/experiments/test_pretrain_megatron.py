"""experiments.pretrain on a Megatron dataset (the "megatron" component kind): kill -9, then SIGTERM, then the
rest; the losses equal those of the uninterrupted in-process run of configs/runs/tiny_resume.py, whose demo
component holds the same documents (so the data iterator resumes exactly, and the kind reads what the demo
kind reads). Blends resume bitwise too: tests/data/test_megatron.py."""

import os
import signal
import subprocess
import sys

import numpy as np

from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.data.megatron import write_indexed_dataset
from apertus_jax.data.run_tokenizer import demo_tokenizer

from .test_pretrain import ROOT, _env, _last_step, _signal_after_step

CONFIG = '''from configs.runs import tiny_resume


def get_config():
    """tiny_resume with its data replaced by a Megatron dataset of the same documents (same component name)."""
    config = tiny_resume.get_config()
    with config.unlocked():
        config.data.pipeline.components = {{"demo": {{"kind": "megatron", "paths": "{prefix}"}}}}
    return config
'''


def _write_run(tmp_path):
    """The UDHR training documents of tiny_resume's demo component, in its order and with its demo BPE ids
    (1,024 ids: uint16), as the Megatron dataset PREFIX = tmp_path/udhr; and the run's config file."""
    tokenizer = demo_tokenizer(1024)
    texts = [d["text"] for d in load_demo_documents("train", ["udhr"])]
    write_indexed_dataset(str(tmp_path / "udhr"), [tokenizer.encode_document(t) for t in texts], np.uint16)
    config = tmp_path / "megatron_resume.py"
    config.write_text(CONFIG.format(prefix=tmp_path / "udhr"))
    return str(config)


def _start(config, workdir, env):
    command = [sys.executable, "-m", "experiments.pretrain", f"--config={config}", f"--workdir={workdir}"]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def _steps(workdir):
    return sorted(int(s) for s in os.listdir(os.path.join(workdir, "checkpoints")) if s.isdigit())


def test_kill9_and_sigterm_on_a_megatron_dataset_resume_exactly(
    uninterrupted, losses_of, compilation_cache, tmp_path
):
    config_path, workdir = _write_run(tmp_path), str(tmp_path / "run")
    env = _env(compilation_cache)
    _signal_after_step(_start(config_path, workdir, env), workdir, 4, signal.SIGKILL)
    assert _last_step(workdir) < 12
    process = _start(config_path, workdir, env)
    assert _signal_after_step(process, workdir, _steps(workdir)[-1], signal.SIGTERM) == 0, (
        process.stderr.read()
    )
    assert _steps(workdir)[-1] == _last_step(workdir) < 12  # SIGTERM: a checkpoint at the current step
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
    # As in test_pretrain.py: bitwise in-process, one float32 ulp allowed across processes under load.
    np.testing.assert_allclose(
        [loss for _, loss in resumed], [loss for _, loss in reference], rtol=2e-7, atol=0
    )


def test_a_truncated_bin_stops_pretrain_with_one_line_before_anything_is_written(compilation_cache, tmp_path):
    config_path = _write_run(tmp_path)
    with open(tmp_path / "udhr.bin", "r+b") as f:
        f.truncate(5000)
    workdir = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "experiments.pretrain", f"--config={config_path}", f"--workdir={workdir}"],
        cwd=ROOT,
        env=_env(compilation_cache),
        capture_output=True,
        text=True,
        timeout=300,
    )
    # The error alone: the prefix is opened before the run logs its start-up lines.
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith(
        f"error: data.pipeline.components.demo: {tmp_path / 'udhr.bin'}: 5000 bytes, but sequence 0 of "
    )
    assert lines[0].endswith("the .bin is truncated or the index points past its end")
    assert not workdir.exists()


def test_gpt_samples_of_a_missing_or_truncated_prefix_stop_with_the_error_alone(compilation_cache, tmp_path):
    """experiments.pretrain_gpt_samples on a prefix without files, then on a truncated .bin, then with a split
    that leaves the train part empty: the one error line alone on stderr, exit 2, no workdir."""
    _write_run(tmp_path)
    workdir = tmp_path / "run"
    cases = [
        (str(tmp_path / "none"), "969,30,1", f"error: {tmp_path / 'none.idx'}: no such file"),
        (str(tmp_path / "udhr"), "0,1,0", "error: split='0,1,0' gives the train part no sequences"),
    ]
    for prefix, split, message in cases:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "experiments.pretrain_gpt_samples",
                "--config=configs/runs/tiny_resume.py",
                f"--workdir={workdir}",
                f"--data_path={prefix}",
                f"--split={split}",
            ],
            cwd=ROOT,
            env=_env(compilation_cache),
            capture_output=True,
            text=True,
            timeout=300,
        )
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
        assert lines[0].startswith(message), lines
        assert not workdir.exists()
