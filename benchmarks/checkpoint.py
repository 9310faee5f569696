"""Checkpoint save/restore throughput (GB/s) and how long an async save blocks training, with the trainer's
`Checkpointer` (Orbax CheckpointManager: state arrays + Grain iterator state + JSON meta).

    python -m benchmarks.checkpoint [--config=bench-18m-apertus --optimizer ademamix --dir /tmp/... --repeats 3]

For the train state of `--config` (params + optimizer state, float32) it reports, as medians of `--repeats`:
  sync_save   -- `save` + `wait` with async checkpointing off: state bytes / seconds;
  async_block -- how long `save` returns after being called with async checkpointing on (the time the
                 training loop is blocked: Orbax copies the arrays to host memory, then writes in a thread);
  step_during_async -- the first train step run while that background write is in flight, vs a step without;
  async_total -- until `wait` returns (committed);
  restore     -- `restore_latest` onto abstract targets with shardings (what a resume does): bytes / seconds.
Restores read files the save just wrote, so they are mostly served from the OS page cache: an upper bound
on a cold read.
"""

import os
import statistics
import tempfile
import time

import grain
import jax
from absl import flags

from apertus_jax.train.checkpoint import Checkpointer, tree_shapes
from benchmarks.step import build
from experiments import cli

_CONFIG = flags.DEFINE_string("config", "bench-18m-apertus", "model preset (apertus_jax.models.presets)")
_OPTIMIZER = flags.DEFINE_enum(
    "optimizer", "ademamix", ["ademamix", "adamw"], "optimizer (its state is saved)"
)
_DIR = flags.DEFINE_string("dir", None, "parent directory of the temporary checkpoints")
_REPEATS = flags.DEFINE_integer("repeats", 3, "repetitions; medians are reported")


def state_bytes(state) -> int:
    """Total bytes of the arrays in `state`."""
    return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state))


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def measure(
    config_name: str = "bench-18m-apertus",
    optimizer: str = "ademamix",
    directory: str | None = None,
    repeats: int = 3,
) -> dict:
    """Runs the measurements described in the module docstring; returns a dict of medians (seconds, GB/s)."""
    _, step, state, batch = build(config_name, 4, 256, "float32", optimizer)
    params, opt_state = state["params"], state["opt_state"]
    for _ in range(2):  # compile and warm up
        params, opt_state, metrics = step(params, opt_state, batch, None)
    jax.block_until_ready(metrics)
    state = {"params": params, "opt_state": opt_state}
    nbytes = state_bytes(state)
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), state)
    data_iter = iter(grain.MapDataset.range(8).to_iter_dataset())
    meta = {"progress": {"step": 0}, "param_shapes": tree_shapes(state["params"]), "seed": 0}
    results = {
        k: []
        for k in ("sync_save", "async_block", "async_total", "step_during_async", "step_alone", "restore")
    }
    with tempfile.TemporaryDirectory(dir=directory) as root:
        sync = Checkpointer(os.path.join(root, "sync"), keep=1, async_save=False)
        background = Checkpointer(os.path.join(root, "async"), keep=1, async_save=True)
        for i in range(repeats):
            seconds, _ = _timed(lambda: (sync.save(i, state, data_iter, meta), sync.wait()))
            results["sync_save"].append(seconds)
            seconds, _ = _timed(lambda: jax.block_until_ready(step(*_copy(state), batch, None)))
            results["step_alone"].append(seconds)
            start = time.perf_counter()
            background.save(i, state, data_iter, meta)
            results["async_block"].append(time.perf_counter() - start)
            seconds, _ = _timed(lambda: jax.block_until_ready(step(*_copy(state), batch, None)))
            results["step_during_async"].append(seconds)
            background.wait()
            results["async_total"].append(time.perf_counter() - start)
            seconds, restored = _timed(lambda: sync.restore_latest(abstract, data_iter))
            jax.block_until_ready(restored[0])
            results["restore"].append(seconds)
        sync.close()
        background.close()
    medians = {k: statistics.median(v) for k, v in results.items()}
    return {
        "config": config_name,
        "optimizer": optimizer,
        "state_gb": nbytes / 1e9,
        **medians,
        "sync_save_gb_s": nbytes / 1e9 / medians["sync_save"],
        "async_total_gb_s": nbytes / 1e9 / medians["async_total"],
        "restore_gb_s": nbytes / 1e9 / medians["restore"],
    }


def _copy(state):
    """A fresh copy of (params, opt_state): the jitted step donates its inputs, the saved state must live on."""
    return jax.tree.map(lambda x: x.copy(), (state["params"], state["opt_state"]))


def main(argv) -> None:
    del argv
    r = measure(_CONFIG.value, _OPTIMIZER.value, _DIR.value, _REPEATS.value)
    print(
        f"checkpoint {r['config']} {r['optimizer']} state={r['state_gb']:.3f} GB (median of {_REPEATS.value}): "
        f"sync save {r['sync_save']:.2f}s = {r['sync_save_gb_s']:.2f} GB/s; async save blocks "
        f"{1e3 * r['async_block']:.0f} ms, committed after {r['async_total']:.2f}s = "
        f"{r['async_total_gb_s']:.2f} GB/s; train step {1e3 * r['step_alone']:.0f} ms alone vs "
        f"{1e3 * r['step_during_async']:.0f} ms during the async write; restore {r['restore']:.2f}s = "
        f"{r['restore_gb_s']:.2f} GB/s (page cache)"
    )


if __name__ == "__main__":
    cli.execute(main)
