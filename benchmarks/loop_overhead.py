"""The trainer's own loop against its bare step: the host work per step must stay within 5% of the step.

    python -m benchmarks.loop_overhead [--steps 120 --bare_steps 30 --workdir DIR]

Runs `apertus_jax.train.loop.train` on bench-18m-apertus (4 x 256 tokens per step, float32) with the real
data pipeline (demo corpus, demo BPE, packing, EoD masks, Goldfish), metrics (JSON lines, TensorBoard, the
log line) and a checkpoint every 100 steps (async) plus the final one, and times the same jitted step
(`Run.train_step`) alone on a device-resident batch before and after it. Loop time per step: the mean of the
per-step intervals of metrics.jsonl after the first 10 steps (compilation), checkpoint steps included. Bare:
the mean over `--bare_steps` steps (block_until_ready after each) of the two bare runs. Prints both and the
overhead in percent; the loop passes when it is <= 5%.
"""

import json
import os
import statistics
import tempfile
import time

import jax
from absl import flags

from apertus_jax.config.schema import base_config, parse
from apertus_jax.models.presets import model_section
from apertus_jax.train import loop
from apertus_jax.train.run import Run
from apertus_jax.train.train_state import batch_sharding
from benchmarks.step import synthetic_batch
from experiments import cli

_STEPS = flags.DEFINE_integer("steps", 120, "loop steps (>= 101: the run includes the step-100 checkpoint)")
_BARE_STEPS = flags.DEFINE_integer("bare_steps", 30, "timed steps of each bare run")
_WORKDIR = flags.DEFINE_string("workdir", "", "the loop's run directory (default: a fresh temporary one)")

ROWS, SEQ = 4, 256


def loop_config(steps: int):
    """bench-18m-apertus on the demo corpus through the full trainer config (AdEMAMix, WSD, Goldfish), typed."""
    config = base_config()
    config.model = model_section("bench-18m-apertus", max_seq_len=SEQ)
    config.data.demo_tokenizer_vocab = 1024
    config.data.seq_len = SEQ
    config.train.steps = steps
    config.train.batch_plan = ((0, ROWS * SEQ),)
    config.optim.warmup_tokens = 10 * ROWS * SEQ
    config.optim.decay_tokens = 10 * ROWS * SEQ
    config.optim.total_tokens = steps * ROWS * SEQ
    config.optim.clip_norm = 1.0
    config.checkpoint.every_steps = 100
    return parse(config)


def bare_step_seconds(config, steps: int) -> float:
    """Mean seconds of the run's jitted step on a resident batch (after 2 warm-up steps)."""
    run = Run(config)
    state = run.spec.init()
    params, opt_state = state["params"], state["opt_state"]
    batch = jax.device_put(synthetic_batch(ROWS, SEQ, 1024), batch_sharding(run.mesh))
    fn = run.train_step(ROWS).fn
    times = []
    with jax.set_mesh(run.mesh):
        for i in range(steps + 2):
            start = time.perf_counter()
            params, opt_state, metrics = fn(params, opt_state, batch, None)
            jax.block_until_ready((params, opt_state, metrics))
            if i >= 2:
                times.append(time.perf_counter() - start)
    return statistics.mean(times)


def loop_step_seconds(config, workdir: str) -> float:
    """Mean per-step interval of the loop after step 10 (from metrics.jsonl)."""
    assert loop.train(Run(config), workdir) == "done"
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    return statistics.mean(ROWS * SEQ / r["tokens_per_s"] for r in records[10:])


def main(argv) -> None:
    del argv
    if _STEPS.value < 101:
        raise ValueError(
            f"--steps={_STEPS.value} must be >= 101 so that the run includes the step-100 checkpoint"
        )
    config = loop_config(_STEPS.value)
    workdir = _WORKDIR.value or tempfile.mkdtemp(prefix="loop_overhead_")
    bare_before = bare_step_seconds(config, _BARE_STEPS.value)
    print(f"bare step (before): {1e3 * bare_before:.1f} ms", flush=True)
    looped = loop_step_seconds(config, workdir)
    print(f"loop step: {1e3 * looped:.1f} ms ({_STEPS.value} steps, workdir {workdir})", flush=True)
    bare_after = bare_step_seconds(config, _BARE_STEPS.value)
    bare = (bare_before + bare_after) / 2
    overhead = looped / bare - 1
    print(
        f"bare step (after): {1e3 * bare_after:.1f} ms; loop {1e3 * looped:.1f} ms vs bare {1e3 * bare:.1f} ms: "
        f"overhead {100 * overhead:+.1f}% ({'PASS' if overhead <= 0.05 else 'FAIL'} <= 5%)"
    )


if __name__ == "__main__":
    cli.execute(main)
