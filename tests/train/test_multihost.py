"""Two processes on localhost (CPU, gloo collectives) run the real main job and match one process.

configs/runs/tiny_resume.py fixes `data.num_shards = 2`, so its global batch is the same whether one process reads
both shards or each of two processes reads one; each process builds its rows into the global batch with
`jax.make_array_from_process_local_data` (apertus_jax.train.train_state). Both runs use the same (1, 2, 1) mesh:
two processes with one CPU device each, or one process with two devices.
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from apertus_jax.config.schema import parse
from apertus_jax.data.pipeline import pipeline_source
from apertus_jax.data.run_tokenizer import run_tokenizer
from apertus_jax.optim.batch_plan import BatchSizePlan
from configs.runs import tiny_resume

from ..conftest import COMPILE_FLAGS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = 4


def _command(workdir):
    return [
        sys.executable,
        "-m",
        "experiments.pretrain",
        "--config=configs/runs/tiny_resume.py",
        f"--config.train.steps={STEPS}",
        f"--config.checkpoint.every_steps={STEPS}",
        f"--workdir={workdir}",
    ]


def _env(compilation_cache, devices, **extra):
    return dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=compilation_cache,
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices} {COMPILE_FLAGS}",
        **extra,
    )


def _losses(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [(r["step"], r["loss"], r["grad_norm"]) for r in map(json.loads, f)]


def _free_loopback_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_each_process_reads_its_own_shard_and_together_the_global_batch():
    config = parse(tiny_resume.get_config())
    tokenizer = run_tokenizer(config.data.tokenizer, config.data.demo_tokenizer_vocab)
    plan, seed = config.train.plan, config.seed
    single = next(pipeline_source(config.data, tokenizer, plan, seed, process_index=0, process_count=1))
    per_process = [
        next(pipeline_source(config.data, tokenizer, plan, seed, process_index=index, process_count=2))
        for index in range(2)
    ]
    rows = [{tuple(row) for row in batch["tokens"]} for batch in per_process]
    assert all(len(batch["tokens"]) == len(single["tokens"]) // 2 for batch in per_process)
    assert not rows[0] & rows[1]  # disjoint documents give different rows
    for key in single:
        np.testing.assert_array_equal(np.concatenate([b[key] for b in per_process]), single[key])


@pytest.mark.slow(minutes=2)
def test_two_processes_match_one_process_bitwise(compilation_cache, tmp_path):
    one_dir, two_dir = str(tmp_path / "one"), str(tmp_path / "two")
    port = _free_loopback_port()
    runs = [
        subprocess.Popen(
            _command(one_dir),
            cwd=ROOT,
            env=_env(compilation_cache, 2),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    ]
    runs += [
        subprocess.Popen(
            _command(two_dir),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(
                compilation_cache,
                1,
                JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
                JAX_NUM_PROCESSES="2",
                JAX_PROCESS_ID=str(i),
            ),
        )
        for i in range(2)
    ]
    for run in runs:
        assert run.wait(timeout=300) == 0, run.stderr.read()[-3000:]
    one, two = _losses(one_dir), _losses(two_dir)
    assert [s for s, _, _ in two] == list(range(1, STEPS + 1))
    # Bitwise: with two devices every cross-device reduction adds exactly two partial sums, and a + b == b + a
    # in floating point, so gloo and the in-process CPU collectives give identical results.
    assert two == one
    assert len({loss for _, loss, _ in one}) == STEPS  # the runs trained (a different loss every step)
    # Both processes wrote one checkpoint together into the shared workdir.
    assert os.listdir(os.path.join(two_dir, "checkpoints")) == [str(STEPS)]
    # Tokens consumed per component are summed over both processes' iterators (a collective).
    with (
        open(os.path.join(one_dir, "provenance.json")) as f1,
        open(os.path.join(two_dir, "provenance.json")) as f2,
    ):
        record_one, record_two = json.load(f1), json.load(f2)
    assert record_two["tokens_consumed"] == record_one["tokens_consumed"]
    assert record_one["tokens_consumed_total"] == BatchSizePlan(
        tiny_resume.get_config().train.batch_plan
    ).tokens_at_step(STEPS)
