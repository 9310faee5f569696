"""Memory plan: AOT-compile the train step on virtual CPU meshes and print per-device bytes.

    python -m experiments.memory_plan --config=configs/apertus_8b.py
    python -m experiments.memory_plan --config=configs/apertus_70b.py --meshes=1x256x1,1x64x4

Nothing is allocated: the state is `jax.eval_shape`d, the trainer's step (`make_train_step`, jitted with the
loop's shardings and donation, traced under `jax.set_mesh` so the model's activation constraints apply) is
lowered on `jax.ShapeDtypeStruct`s over up to 256 virtual CPU devices (XLA_FLAGS, set before jax is
imported) and compiled. Per device:

  params       float32 parameters, from their shardings (exact)
  optimizer    optimizer state (AdEMAMix: 3 float32 moments per parameter, counters), from the shardings
  activations  the compiled executable's temporaries: activations kept for the backward pass, gradients,
               collective and matmul workspace (`memory_analysis().temp_size_in_bytes`)
  total        everything the executable needs: arguments + outputs - donated aliases + temporaries

A microbatch is `--rows_per_device` sequences per batch-sharded (data x fsdp) device; gradient accumulation
over more microbatches adds no activation memory (they run one after another under `lax.scan`).

Caveats: the CPU compiler's buffer assignment approximates a GPU/TPU one; attention is lowered with the plain
XLA implementation (it materializes the [heads, T, T] scores that cuDNN/splash kernels avoid), so activation
figures are upper bounds for configs that use those kernels.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=256"

import time  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from apertus_jax.models import partitioning  # noqa: E402
from apertus_jax.optim import BatchSizePlan  # noqa: E402
from apertus_jax.train import config as config_lib  # noqa: E402
from apertus_jax.train.loop import make_lr_schedule, make_tx  # noqa: E402
from apertus_jax.train.sharding import batch_sharding  # noqa: E402
from apertus_jax.train.step import make_train_step  # noqa: E402
from apertus_jax.train.train_state import TrainStateSpec, make_train_state_spec  # noqa: E402
from experiments import cli

_CONFIG = config_flags.DEFINE_config_file("config", "configs/apertus_8b.py", "Run config to plan.")
_MESHES = flags.DEFINE_list("meshes", [], "Meshes as DATAxFSDPxTENSOR (default: two per model size).")
_ROWS = flags.DEFINE_integer("rows_per_device", 1, "Sequences per batch-sharded device in one microbatch.")

GB = 1e9
DEVICE_MEMORY_GB = {"H100 80GB": 80, "H200 141GB": 141, "TPU v5p 95GB": 95}
DEFAULT_MESHES = {  # by d_model: 8B on 64 devices, 70B on 256
    4096: ["1x64x1", "1x16x4"],
    8192: ["1x256x1", "1x64x4"],
}
BATCH_KEYS = ("tokens", "targets", "positions", "segment_ids", "loss_mask")


def shard_bytes(tree) -> int:
    """Bytes one device holds of a tree of ShapeDtypeStructs with NamedShardings (the largest shard)."""
    return sum(
        int(np.prod(x.sharding.shard_shape(x.shape))) * x.dtype.itemsize for x in jax.tree.leaves(tree)
    )


def state_spec(config, mesh_shape: tuple[int, int, int]) -> tuple[TrainStateSpec, object, jax.sharding.Mesh]:
    """(train-state spec, optax transformation, mesh) of `config` on the first devices; nothing allocated.

    Raises:
      ValueError: a mesh with more devices than exist.
    """
    if np.prod(mesh_shape) > jax.device_count():
        raise ValueError(
            f"mesh {'x'.join(map(str, mesh_shape))} needs {np.prod(mesh_shape)} devices, "
            f"{jax.device_count()} exist"
        )
    mesh = partitioning.make_mesh(*mesh_shape, devices=jax.devices()[: int(np.prod(mesh_shape))])
    # The CPU compiler has no flash attention; the einsum kernel is the (upper-bound) stand-in.
    model_config = config_lib.model_config(config).replace(attention_impl="xla")
    tx = make_tx(config.optim, make_lr_schedule(config.optim, BatchSizePlan(config.train.batch_plan)))
    return make_train_state_spec(model_config, tx, mesh, config.seed), tx, mesh


def plan_one(config, mesh_shape: tuple[int, int, int], rows_per_device: int) -> dict:
    """Compiles the train step for `mesh_shape` and returns per-device bytes (see the module docstring)."""
    spec, tx, mesh = state_spec(config, mesh_shape)
    rows = mesh_shape[0] * mesh_shape[1] * rows_per_device
    batch = {
        k: jax.ShapeDtypeStruct((rows, config.data.seq_len), np.int32, sharding=batch_sharding(mesh))
        for k in BATCH_KEYS
    }
    step = jax.jit(
        make_train_step(spec.apply_fn, tx, 1),
        in_shardings=(spec.shardings["params"], spec.shardings["opt_state"], batch_sharding(mesh)),
        out_shardings=(spec.shardings["params"], spec.shardings["opt_state"], None),
        donate_argnums=(0, 1),
    )
    start = time.time()
    with jax.set_mesh(mesh):
        compiled = step.lower(spec.abstract["params"], spec.abstract["opt_state"], batch).compile()
    memory = compiled.memory_analysis()
    total = (
        memory.argument_size_in_bytes
        + memory.output_size_in_bytes
        - memory.alias_size_in_bytes
        + memory.temp_size_in_bytes
    )
    return {
        "mesh": "x".join(map(str, mesh_shape)),
        "devices": int(np.prod(mesh_shape)),
        "rows": rows,
        "params": shard_bytes(spec.abstract["params"]),
        "opt_state": shard_bytes(spec.abstract["opt_state"]),
        "activations": memory.temp_size_in_bytes,
        "total": total,
        "compile_s": time.time() - start,
    }


def parse_mesh(text: str) -> tuple[int, int, int]:
    """ "1x64x1" -> (1, 64, 1) (data, fsdp, tensor).

    Raises:
      ValueError: not three positive integers joined by "x".
    """
    parts = text.split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"mesh {text!r}: use DATAxFSDPxTENSOR with positive sizes, e.g. 1x64x1")
    return tuple(int(p) for p in parts)


def main(argv) -> None:
    del argv
    config = _CONFIG.value
    meshes = _MESHES.value or DEFAULT_MESHES.get(config.model.d_model)
    if not meshes:
        raise app.UsageError("no default meshes for this model size; pass --meshes=DATAxFSDPxTENSOR,...")
    try:
        shapes = [parse_mesh(m) for m in meshes]
    except ValueError as error:
        raise app.UsageError(str(error)) from None
    name = config.model.preset
    print(
        f"{name}: seq_len {config.data.seq_len}, {_ROWS.value} row(s) per batch-sharded device, "
        f"compute {config.model.dtype}, remat {config.model.remat_policy}, XLA einsum attention; "
        f"GB = 1e9 bytes per device"
    )
    header = [
        "mesh (data x fsdp x tensor)",
        "params",
        "optimizer",
        "activations+temps",
        "total",
        *(f"fits {k}" for k in DEVICE_MEMORY_GB),
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for shape in shapes:
        try:
            r = plan_one(config, shape, _ROWS.value)
        except ValueError as error:
            raise app.UsageError(str(error)) from None
        fits = ["yes" if r["total"] <= gb * GB else "no" for gb in DEVICE_MEMORY_GB.values()]
        print(
            f"| {r['mesh']} ({r['devices']} dev, {r['rows']} rows) | {r['params'] / GB:.2f} | "
            f"{r['opt_state'] / GB:.2f} | {r['activations'] / GB:.2f} | {r['total'] / GB:.2f} | "
            + " | ".join(fits)
            + f" |  (compiled in {r['compile_s']:.0f} s)",
            flush=True,
        )
    largest = max(tokens for _, tokens in config.train.batch_plan) // config.data.seq_len
    print(
        f"Microbatches of the 'rows' column: train with --config.train.microbatch_size=ROWS (this config has "
        f"{config.train.microbatch_size}, 0 = its whole batch of up to {largest} rows in one pass)."
    )


if __name__ == "__main__":
    cli.run_absl(main)
