"""experiments.pretrain on a Megatron blend (the "megatron" component kind): kill -9, then SIGTERM, then the
rest; the losses equal an uninterrupted run's (the data iterator resumes exactly from the checkpoints)."""

import os
import signal
import subprocess
import sys

import numpy as np

from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.data.megatron import write_indexed_dataset
from apertus_jax.data.tokenizer import demo_tokenizer

from ..conftest import train
from .test_pretrain import ROOT, _env, _last_step, _signal_after_step

CONFIG = '''from configs.runs import tiny_resume


def get_config():
    """tiny_resume with its data replaced by a Megatron blend of two prefixes (same component name)."""
    config = tiny_resume.get_config()
    with config.unlocked():
        config.data.pipeline.components = {{"demo": {{"kind": "megatron", "paths": "{blend}"}}}}
    return config
'''


def _write_run(tmp_path):
    """Two prefixes of UDHR translations (the demo BPE's 1,024 ids fit uint16) and the run's config file."""
    tokenizer = demo_tokenizer(1024)
    texts = [d["text"] for d in load_demo_documents("train", ["udhr"])]
    halves = {"first": texts[:40], "second": texts[40:70]}
    for name, part in halves.items():
        documents = [tokenizer.encode_document(t) for t in part]
        write_indexed_dataset(str(tmp_path / name), documents, np.uint16)
    config = tmp_path / "megatron_resume.py"
    config.write_text(CONFIG.format(blend=f"0.3 {tmp_path / 'first'} 0.7 {tmp_path / 'second'}"))
    return str(config)


def _start(config, workdir, env):
    command = [sys.executable, "-m", "experiments.pretrain", f"--config={config}", f"--workdir={workdir}"]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def _steps(workdir):
    return sorted(int(s) for s in os.listdir(os.path.join(workdir, "checkpoints")) if s.isdigit())


def test_kill9_and_sigterm_on_a_megatron_blend_resume_exactly(losses_of, compilation_cache, tmp_path):
    config_path = _write_run(tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        import megatron_resume
    finally:
        sys.path.remove(str(tmp_path))
    reference_dir, workdir = str(tmp_path / "uninterrupted"), str(tmp_path / "run")
    assert train(megatron_resume.get_config(), reference_dir) == "done"

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
    assert '"kind": "megatron"' in recorded and str(tmp_path / "second") in recorded
    resumed, reference = losses_of(workdir), losses_of(reference_dir)
    assert [s for s, _ in resumed] == [s for s, _ in reference] == list(range(1, 13))
    # As in test_pretrain.py: bitwise in-process, one float32 ulp allowed across processes under load.
    np.testing.assert_allclose(
        [loss for _, loss in resumed], [loss for _, loss in reference], rtol=2e-7, atol=0
    )


def test_a_truncated_bin_stops_pretrain_with_one_line_before_anything_is_written(compilation_cache, tmp_path):
    config_path = _write_run(tmp_path)
    with open(tmp_path / "second.bin", "r+b") as f:
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
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith(f"error: {tmp_path / 'second.bin'}: 5000 bytes, but sequence 0 of ")
    assert lines[0].endswith("the .bin is truncated or the index points past its end")
    assert not workdir.exists()
