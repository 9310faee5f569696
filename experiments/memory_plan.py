"""Memory plan: AOT-compile the train step on virtual CPU meshes and print per-device bytes.

    python -m experiments.memory_plan --config=configs/apertus_8b.py
    python -m experiments.memory_plan --config=configs/apertus_70b.py --meshes=1x256x1,1x64x4 --rows_per_device=1
    python -m experiments.memory_plan --config=configs/apertus_8b_long_context.py:64k --meshes=1x16x1x4

Nothing is allocated: the run is assembled by `apertus_jax.train.assemble.Run`, the same code the training
loop uses, and THE train step the loop would run for the config's largest batch (same shardings, donation and
`train.microbatch_size` microbatches; traced under `jax.set_mesh` so the model's activation constraints
apply) is lowered on `jax.ShapeDtypeStruct`s over up to 256 virtual CPU devices (XLA_FLAGS, set before jax is
imported) and compiled. Per device:

  params       float32 parameters, from their shardings (exact)
  optimizer    optimizer state (AdEMAMix: 3 float32 moments per parameter, counters), from the shardings
  activations  the compiled executable's temporaries: activations kept for the backward pass, gradients,
               collective and matmul workspace (`memory_analysis().temp_size_in_bytes`)
  total        everything the executable needs: arguments + outputs - donated aliases + temporaries

The microbatch is the config's `train.microbatch_size` (override it like any field), or, with
`--rows_per_device=N`, N sequences per batch-sharded (data x fsdp) device of each mesh (the plan then sets
`train.microbatch_size` to data x fsdp x N for that mesh). Gradient accumulation over more microbatches adds
no activation memory (they run one after another under `lax.scan`).

Caveats: the CPU compiler's buffer assignment approximates a GPU/TPU one; attention is lowered with the plain
XLA implementation (it materializes the [heads, T, T] scores that cuDNN/splash kernels avoid), so activation
figures are upper bounds for configs that use those kernels.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=256"

import copy  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from apertus_jax.train.assemble import Run  # noqa: E402
from experiments import cli  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config", "configs/apertus_8b.py", "Run config to plan.")
_MESHES = flags.DEFINE_list(
    "meshes", [], "Meshes as DATAxFSDPxTENSOR or DATAxFSDPxTENSORxCONTEXT (default: two per model size)."
)
_ROWS = flags.DEFINE_integer(
    "rows_per_device",
    0,
    "Sequences per batch-sharded device in one microbatch (sets train.microbatch_size per mesh); "
    "0 = the config's train.microbatch_size as it is.",
)

GB = 1e9
DEVICE_MEMORY_GB = {"H100 80GB": 80, "H200 141GB": 141, "TPU v5p 95GB": 95}
DEFAULT_MESHES = {  # by d_model: 8B on 64 devices, 70B on 256
    4096: ["1x64x1", "1x16x4"],
    8192: ["1x256x1", "1x64x4"],
}


def shard_bytes(tree) -> int:
    """Bytes one device holds of a tree of ShapeDtypeStructs with NamedShardings (the largest shard)."""
    return sum(
        int(np.prod(x.sharding.shard_shape(x.shape))) * x.dtype.itemsize for x in jax.tree.leaves(tree)
    )


def plan_run(config, mesh_shape: tuple[int, ...], rows_per_device: int = 0) -> Run:
    """The run of `config` on a `mesh_shape` mesh of the first virtual devices, as the loop assembles it;
    XLA einsum attention (the CPU compiler has no flash kernel: an upper bound); nothing allocated.

    Args:
      mesh_shape: (data, fsdp, tensor) or (data, fsdp, tensor, context).
      rows_per_device: > 0 sets `train.microbatch_size` to data x fsdp x rows_per_device.

    Raises:
      ValueError: a mesh with more devices than exist, or a config the mesh does not fit (one line).
    """
    devices = int(np.prod(mesh_shape))
    if devices > jax.device_count():
        raise ValueError(
            f"mesh {'x'.join(map(str, mesh_shape))} needs {devices} devices, {jax.device_count()} exist"
        )
    config = copy.deepcopy(config)
    with config.unlocked():
        config.mesh.data, config.mesh.fsdp, config.mesh.tensor, config.mesh.context = (*mesh_shape, 1)[:4]
        config.model.attention_impl = "xla"
        if rows_per_device:
            config.train.microbatch_size = mesh_shape[0] * mesh_shape[1] * rows_per_device
    return Run(config, devices=jax.devices()[:devices])


def state_spec(config, mesh_shape: tuple[int, ...]):
    """(train-state spec, optax transformation, mesh) of `config` on `mesh_shape`; nothing allocated."""
    run = plan_run(config, mesh_shape)
    return run.spec, run.tx, run.mesh


def plan_one(config, mesh_shape: tuple[int, ...], rows_per_device: int = 0) -> dict:
    """Compiles the loop's train step for the config's largest batch on `mesh_shape`; returns per-device
    bytes (module docstring), the batch rows, the microbatch rows (`rows`) and the microbatch count."""
    run = plan_run(config, mesh_shape, rows_per_device)
    batch_rows = max(tokens for _, tokens in run.sections.train.batch_plan) // run.sections.data.seq_len
    step = run.train_step(batch_rows)
    start = time.time()
    compiled = run.lower_train_step(batch_rows).compile()
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
        "batch_rows": batch_rows,
        "microbatches": step.num_microbatches,
        "rows": batch_rows // step.num_microbatches,
        "params": shard_bytes(run.spec.abstract["params"]),
        "opt_state": shard_bytes(run.spec.abstract["opt_state"]),
        "activations": memory.temp_size_in_bytes,
        "total": total,
        "compile_s": time.time() - start,
    }


def parse_mesh(text: str) -> tuple[int, ...]:
    """ "1x64x1" -> (1, 64, 1) (data, fsdp, tensor); "1x16x1x4" -> (1, 16, 1, 4) (..., context).

    Raises:
      ValueError: not three or four positive integers joined by "x".
    """
    parts = text.split("x")
    if len(parts) not in (3, 4) or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(
            f"mesh {text!r}: use DATAxFSDPxTENSOR or DATAxFSDPxTENSORxCONTEXT with positive sizes, e.g. 1x64x1"
        )
    return tuple(int(p) for p in parts)


def main(argv) -> None:
    del argv
    config = _CONFIG.value
    meshes = _MESHES.value or DEFAULT_MESHES.get(config.model.d_model)
    if not meshes:
        raise app.UsageError(
            "no default meshes for this model size; pass --meshes=DATAxFSDPxTENSOR[xCONTEXT],..."
        )
    try:
        shapes = [parse_mesh(m) for m in meshes]
    except ValueError as error:
        raise app.UsageError(str(error)) from None
    name = config.model.preset
    per_device = f"{_ROWS.value} row(s) per batch-sharded device" if _ROWS.value else "train.microbatch_size"
    print(
        f"{name}: the training loop's own step (apertus_jax.train.assemble), seq_len {config.data.seq_len}, "
        f"microbatches of {per_device}, compute {config.model.dtype}, remat {config.model.remat_policy}, "
        "XLA einsum attention; GB = 1e9 bytes per device"
    )
    header = [
        "mesh (data x fsdp x tensor [x context])",
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
            raise app.UsageError(" ".join(str(error).split())) from None
        fits = ["yes" if r["total"] <= gb * GB else "no" for gb in DEVICE_MEMORY_GB.values()]
        print(
            f"| {r['mesh']} ({r['devices']} dev; batch {r['batch_rows']} rows = {r['microbatches']} x "
            f"{r['rows']}) | {r['params'] / GB:.2f} | {r['opt_state'] / GB:.2f} | {r['activations'] / GB:.2f} | "
            f"{r['total'] / GB:.2f} | " + " | ".join(fits) + f" |  (compiled in {r['compile_s']:.0f} s)",
            flush=True,
        )
    print(
        "Train with the same microbatches: --config.train.microbatch_size=ROWS of a microbatch (the 'x ROWS' "
        f"above; this config has {config.train.microbatch_size}, 0 = the whole batch in one pass)."
    )


if __name__ == "__main__":
    cli.run_absl(main)
