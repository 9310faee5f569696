"""Memory plan: the train step of a run AOT-compiled on a mesh of virtual devices, per-device bytes.

    for line in plan_lines(config, "apertus-8b", mesh_shapes(config, ["1x64x1"]), rows_per_device=1):
        print(line)

Nothing is allocated: the run is assembled by `apertus_jax.train.run.Run`, the same code the training
loop uses, and THE train step the loop would run for the config's largest batch (same shardings, donation and
`train.microbatch_size` microbatches; traced under `jax.set_mesh` so the model's activation constraints
apply) is lowered on `jax.ShapeDtypeStruct`s over the first devices and compiled. The caller provides the
devices: `python -m experiments.memory_plan` makes 256 virtual CPU devices (XLA_FLAGS, set before jax is
imported). Per device:

  params       float32 parameters, from their shardings (exact)
  optimizer    optimizer state (AdEMAMix: 3 float32 moments per parameter, counters), from the shardings
  activations  the compiled executable's temporaries: activations kept for the backward pass, gradients,
               collective and matmul workspace (`memory_analysis().temp_size_in_bytes`)
  total        everything the executable needs: arguments + outputs - donated aliases + temporaries

The microbatch is the config's `train.microbatch_size`, or, with `rows_per_device=N`, N sequences per
batch-sharded (data x fsdp) device of each mesh (the plan then sets `train.microbatch_size` to
data x fsdp x N for that mesh). Gradient accumulation over more microbatches adds no activation memory (they
run one after another under `lax.scan`).

Optimizers side by side (`optimizer_lines`, `--optimizers=ademamix,muon`): the optimizer state bytes per device of
each optimizer on each mesh, and the collectives of its update alone (`tx.update` compiled with the train step's
shardings: clipping's global-norm reduction for every optimizer; Muon adds the all-to-alls into and out of its
orthogonalization layout and the all-reduces of X X^T; docs/optimizers.md). Only the update is compiled, not the step.

Caveats: the CPU compiler's buffer assignment approximates a GPU/TPU one; attention is lowered with the plain
XLA implementation (it materializes the [heads, T, T] scores that cuDNN/splash kernels avoid), so activation
figures are upper bounds for configs that use those kernels. The same step compiled by the TPU or GPU compiler
with those kernels: `apertus_jax.aot.target_plan` (docs/accelerators.md).
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator, Sequence

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from apertus_jax import files
from apertus_jax.aot.fast_compile import FAST_COMPILE
from apertus_jax.models import partitioning
from apertus_jax.models.partitioning import MeshConfig
from apertus_jax.models.transformer import param_logical_axes
from apertus_jax.optim.config import make_lr_schedule, make_tx
from apertus_jax.optim.factory import OPTIMIZERS
from apertus_jax.train.config import RunConfig, check_layout
from apertus_jax.train.run import Run
from apertus_jax.train.train_state import make_abstract_params, opt_state_shardings

GB = 1e9
# A plan never runs what it compiles, so XLA:CPU compiles it for analysis only (`fast_compile`): the twelve plans
# that docs/scaling.md, docs/long_context.md and docs/ablations.md quote (six commands) compiled in 32 s of CPU
# instead of 85 s on 2 cores. The fresh runs of tests/test_results.py compare the plans with records made so.
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


def plan_run(
    config: RunConfig,
    mesh_shape: tuple[int, ...],
    rows_per_device: int = 0,
    devices: Sequence | None = None,
    attention_impl: str = "xla",
) -> Run:
    """The run of `config` (typed sections) on a `mesh_shape` mesh of the first `devices` (default this
    process's), as the loop assembles it, with `attention_impl` attention (default XLA einsum: the CPU compiler
    has no flash kernel, an upper bound); nothing allocated.

    Args:
      mesh_shape: (data, fsdp, tensor) or (data, fsdp, tensor, context).
      rows_per_device: > 0 sets `train.microbatch_size` to data x fsdp x rows_per_device.

    Raises:
      ValueError: a mesh with more devices than exist, or a config the mesh does not fit (one line).
    """
    devices = list(jax.devices() if devices is None else devices)
    config = planned_config(config, mesh_shape, rows_per_device, len(devices))
    return Run(
        config.replace(model=config.model.replace(attention_impl=attention_impl)),
        devices=devices[: int(np.prod(mesh_shape))],
    )


def _check_devices(mesh_shape: tuple[int, ...], num_devices: int) -> None:
    needed = int(np.prod(mesh_shape))
    if needed > num_devices:
        raise ValueError(f"mesh {'x'.join(map(str, mesh_shape))} needs {needed} devices, {num_devices} exist")


def planned_config(
    config: RunConfig, mesh_shape: tuple[int, ...], rows_per_device: int = 0, num_devices: int | None = None
) -> RunConfig:
    """`config` on a `mesh_shape` mesh (rows_per_device as `plan_run`), checked without compiling: that many
    of the `num_devices` (default this process's) exist and the batch plan splits over it (`check_layout`).

    Raises:
      ValueError: one line naming the mesh and the problem.
    """
    _check_devices(mesh_shape, jax.device_count() if num_devices is None else num_devices)
    data, fsdp, tensor, context = (*mesh_shape, 1)[:4]
    config = config.replace(mesh=MeshConfig(data=data, fsdp=fsdp, tensor=tensor, context=context))
    if rows_per_device:
        config = config.replace(
            train=dataclasses.replace(config.train, microbatch_size=data * fsdp * rows_per_device)
        )
    try:
        check_layout(config, int(np.prod(mesh_shape)))
    except ValueError as error:
        raise ValueError(f"mesh {'x'.join(map(str, mesh_shape))}: {error}") from None
    return config


def state_spec(config, mesh_shape: tuple[int, ...]):
    """(train-state spec, optax transformation, mesh) of `config` on `mesh_shape`; nothing allocated.

    Raises:
      ValueError: as `plan_run`.
    """
    run = plan_run(config, mesh_shape)
    return run.spec, run.tx, run.mesh


def plan_one(config, mesh_shape: tuple[int, ...], rows_per_device: int = 0) -> dict:
    """Compiles the loop's train step for the config's largest batch on `mesh_shape`; returns per-device
    bytes (module docstring), the batch rows, the microbatch rows (`rows`), the microbatch count and the
    compile time in seconds (`compile_s`).

    Raises:
      ValueError: as `plan_run`.
    """
    run = plan_run(config, mesh_shape, rows_per_device)
    batch_rows = max(tokens for _, tokens in run.config.train.batch_plan) // run.config.data.seq_len
    step = run.train_step(batch_rows)
    start = time.time()
    compiled = run.lower_train_step(batch_rows).compile(FAST_COMPILE)
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


def mesh_shapes(config: RunConfig, meshes: Sequence[str] = ()) -> list[tuple[int, ...]]:
    """The mesh shapes of `meshes` ("DATAxFSDPxTENSOR[xCONTEXT]" each), or the two default meshes of the
    config's model size (`DEFAULT_MESHES`) when `meshes` is empty.

    Raises:
      ValueError: a malformed mesh, or no meshes and no defaults for the model's d_model.
    """
    meshes = list(meshes) or DEFAULT_MESHES.get(config.model.d_model)
    if not meshes:
        raise ValueError(
            "no default meshes for this model size; pass --meshes=DATAxFSDPxTENSOR[xCONTEXT],..."
        )
    return [parse_mesh(m) for m in meshes]


def plan_lines(
    config: RunConfig,
    name: str,
    shapes: Sequence[tuple[int, ...]],
    rows_per_device: int = 0,
    json_path: str = "",
) -> Iterator[str]:
    """The memory plan of `config` (model label `name`) on each of `shapes` as a markdown table: a title
    line, the header, one row per mesh (in GB = 1e9 bytes per device; yielded as each mesh has compiled, a
    few seconds to minutes each) and a closing hint on `train.microbatch_size`; with `json_path`, the plans
    (`plan_one`, bytes per device, with `fits` {device of `DEVICE_MEMORY_GB`: bool}) as a JSON list written
    there after the last.

    Raises:
      ValueError: a mesh with more devices than exist, or a config the mesh does not fit (`planned_config`),
        raised for every mesh before the first line.
    """
    for shape in shapes:
        planned_config(config, shape, rows_per_device)
    per_device = (
        f"{rows_per_device} row(s) per batch-sharded device" if rows_per_device else "train.microbatch_size"
    )
    yield (
        f"{name}: the training loop's own step (apertus_jax.train.run), seq_len {config.data.seq_len}, "
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
    yield "| " + " | ".join(header) + " |"
    yield "|" + "---|" * len(header)
    plans = []
    for shape in shapes:
        r = plan_one(config, shape, rows_per_device)
        r["fits"] = {device: r["total"] <= gb * GB for device, gb in DEVICE_MEMORY_GB.items()}
        plans.append(r)
        fits = ["yes" if fit else "no" for fit in r["fits"].values()]
        yield (
            f"| {r['mesh']} ({r['devices']} dev; batch {r['batch_rows']} rows = {r['microbatches']} x "
            f"{r['rows']}) | {r['params'] / GB:.2f} | {r['opt_state'] / GB:.2f} | {r['activations'] / GB:.2f} | "
            f"{r['total'] / GB:.2f} | " + " | ".join(fits) + f" |  (compiled in {r['compile_s']:.0f} s)"
        )
    yield (
        "Train with the same microbatches: --config.train.microbatch_size=ROWS of a microbatch (the 'x ROWS' "
        f"above; this config has {config.train.microbatch_size}, 0 = the whole batch in one pass)."
    )
    if json_path:
        files.write_json(json_path, plans, indent=1)
        yield f"wrote {json_path}"


COLLECTIVES = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")
# "%name = f32[32,4096,1024]{...} all-gather(" or a tuple "(f32[...], bf16[...]) all-reduce(" in compiled HLO.
_COLLECTIVE_LINE = re.compile(r"=\s*(\(.*?\)|\S+)\s+(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")
_ARRAY_TYPE = re.compile(r"([a-z]+\d*)\[([\d,]*)\]")


def collective_bytes(hlo_text: str) -> dict[str, tuple[int, int]]:
    """{collective: (ops, bytes of their results)} in compiled (SPMD-partitioned) HLO text, per device.

    Counts all-gather, all-reduce, reduce-scatter, all-to-all and collective-permute (their async "-start"
    halves once); result bytes from the result types (f32 4, bf16 2, s32 4, pred 1 byte per element).
    """
    sizes = {"f32": 4, "bf16": 2, "f16": 2, "s32": 4, "u32": 4, "pred": 1, "f64": 8, "s64": 8}
    found = {kind: (0, 0) for kind in COLLECTIVES}
    for result, kind in _COLLECTIVE_LINE.findall(hlo_text):
        elements = [
            (dtype, int(np.prod([int(d) for d in dims.split(",") if d])))
            for dtype, dims in _ARRAY_TYPE.findall(result)
        ]
        ops, total = found[kind]
        found[kind] = (ops + 1, total + sum(n * sizes.get(dtype, 4) for dtype, n in elements))
    return found


def optimizer_plan(config: RunConfig, mesh_shape: tuple[int, ...], name: str) -> dict:
    """Optimizer `name` ("ademamix", "adamw", "muon") of `config`'s optim section on a `mesh_shape` mesh of the
    first devices: its state bytes per device (`opt_state`) and the collectives of its update compiled with
    the train step's shardings (`collectives`, as `collective_bytes`); nothing allocated.

    Raises:
      ValueError: a mesh with more devices than exist, or an unknown optimizer (one line).
    """
    _check_devices(mesh_shape, jax.device_count())
    devices = int(np.prod(mesh_shape))
    data, fsdp, tensor, context = (*mesh_shape, 1)[:4]
    mesh = partitioning.make_mesh(data, fsdp, tensor, jax.devices()[:devices], context)
    optim = dataclasses.replace(config.optim, name=name)
    tx = make_tx(optim, make_lr_schedule(optim, config.train.plan), param_logical_axes(config.model))
    params = make_abstract_params(config.model, mesh, config.seed)
    abstract = jax.eval_shape(tx.init, params.abstract)
    shardings = opt_state_shardings(tx, abstract, params.shardings, NamedSharding(mesh, P()))
    state = jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract, shardings)
    update = jax.jit(
        tx.update,
        in_shardings=(params.shardings, shardings, params.shardings),
        out_shardings=(params.shardings, shardings),
    )
    with jax.set_mesh(mesh):
        compiled = update.lower(params.abstract, state, params.abstract).compile(FAST_COMPILE)
    return {"opt_state": shard_bytes(state), "collectives": collective_bytes(compiled.as_text())}


def optimizer_lines(
    config: RunConfig,
    name: str,
    shapes: Sequence[tuple[int, ...]],
    optimizers: Sequence[str],
    json_path: str = "",
) -> Iterator[str]:
    """A markdown table of the optimizer state per device (GB = 1e9 bytes) and the collectives of one update
    (ops and GB of their results per device) of each of `optimizers` on each of `shapes` (`optimizer_plan`);
    with `json_path`, the rows as a JSON list written there after the last: {mesh, devices, optimizer,
    opt_state (bytes per device), collectives {kind: {ops, bytes}} (the kinds the update has)}.

    Raises:
      ValueError: as `optimizer_plan`; an unknown optimizer or a mesh with more devices than exist is raised
        before the first line, naming `--optimizers` / the mesh.
    """
    unknown = [optimizer for optimizer in optimizers if optimizer not in OPTIMIZERS]
    if unknown:
        raise ValueError(
            f"--optimizers={','.join(optimizers)}: unknown {', '.join(map(repr, unknown))}; use "
            f"{', '.join(sorted(OPTIMIZERS))}"
        )
    for shape in shapes:
        _check_devices(shape, jax.device_count())
    yield (
        f"{name}: optimizer state and the collectives of one optimizer update (clipping included), per device, "
        "GB = 1e9 bytes"
    )
    yield "| mesh (data x fsdp x tensor [x context]) | optimizer | state | collectives of the update |"
    yield "|---|---|---|---|"
    rows = []
    for shape in shapes:
        for optimizer in optimizers:
            r = optimizer_plan(config, shape, optimizer)
            used = {
                kind: {"ops": ops, "bytes": size} for kind, (ops, size) in r["collectives"].items() if ops
            }
            mesh, devices = "x".join(map(str, shape)), int(np.prod(shape))
            rows.append(
                {"mesh": mesh, "devices": devices, "optimizer": optimizer, "opt_state": r["opt_state"]}
                | {"collectives": used}
            )
            cells = [f"{c['ops']} {kind} ({c['bytes'] / GB:.2f})" for kind, c in used.items()]
            yield (
                f"| {mesh} ({devices} dev) | {optimizer} | {r['opt_state'] / GB:.2f} | "
                f"{', '.join(cells) or 'none'} |"
            )
    if json_path:
        files.write_json(json_path, rows, indent=1)
        yield f"wrote {json_path}"
