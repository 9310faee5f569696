"""Logical axis names -> mesh axes: the one rule table, parameter shardings and activation constraints.

Parameters carry `logical_axes` metadata (one name or None per dimension; see `layers.normal_param`).
`LOGICAL_AXIS_RULES` maps each name to an ordered tuple of mesh axes of the 4-D mesh ("data", "fsdp",
"tensor", "context"), MaxText style: batch over data and fsdp, embed over fsdp (ZeRO-3 style weight sharding),
heads / kv_heads / mlp / vocab over tensor, the sequence ("length") of activations over context (context
parallelism; parameters have no "length" dimension), everything else replicated. Weights are split over
context as well as fsdp ("embed"): the devices of a context group would otherwise each hold the same
parameter and optimizer shards (ZeRO-3 over the context group; in activations "length" takes the context axis
first, so "embed" stays as it was there). The context axis is the last
(innermost) mesh axis: its per-layer K/V all-gather is the largest collective of a long-context step, so its
devices are the nearest neighbours. With `context = 1` (the default) the mesh has no context axis (`make_mesh`).

Fallback (documented rule): a mesh axis is dropped for a dimension when it is absent from the mesh, has
size 1, is already used by an earlier dimension of the same array, or does not divide the dimension (e.g.
8 kv heads on a tensor axis of 16). The dimension is then replicated over that mesh axis.
"""

import dataclasses
import math
from collections.abc import Sequence

import jax
import numpy as np
from flax import nnx
from jax.experimental import mesh_utils
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from apertus_jax.checks import check_number

MESH_AXES = ("data", "fsdp", "tensor", "context")

LOGICAL_AXIS_RULES: dict[str, tuple[str, ...]] = {
    "batch": ("data", "fsdp"),
    "replica_batch": ("data",),  # the batch over data replicas only: each fsdp group sees all its rows
    "length": ("context",),
    "embed": ("fsdp", "context"),
    "heads": ("tensor",),
    "kv_heads": ("tensor",),
    "head_dim": (),
    "mlp": ("tensor",),
    "vocab": ("tensor",),
    "layers": (),
}


@dataclasses.dataclass(frozen=True)
class MeshConfig:
    """The `mesh` section of a run: sizes of the ("data", "fsdp", "tensor", "context") axes; one may be -1
    (fill). `context` splits the sequence of every activation (context parallelism, docs/long_context.md).

    Raises:
      ValueError: in `__post_init__`, a size that is not an integer >= 1 or -1, or more than one -1.
    """

    data: int = -1
    fsdp: int = 1
    tensor: int = 1
    context: int = 1

    def __post_init__(self):
        sizes = [getattr(self, name) for name in MESH_AXES]
        named = ", ".join(f"{n}={s}" for n, s in zip(MESH_AXES, sizes))
        for name, size in zip(MESH_AXES, sizes):
            if size != -1:
                try:
                    check_number(f"mesh.{name}", size, low=1, integer=True)
                except ValueError:
                    raise ValueError(
                        f"mesh.{name} must be a positive integer or -1 (fill), got {size!r}"
                    ) from None
        if sizes.count(-1) > 1:
            raise ValueError(f"mesh ({named}): sizes must be >= 1, with at most one -1 (fill)")

    def resolve(self, num_devices: int) -> tuple[int, int, int, int]:
        """(data, fsdp, tensor, context) with the -1 filled so that the sizes multiply to `num_devices`.

        Raises:
          ValueError: the fixed sizes do not divide, or do not multiply to, the device count.
        """
        sizes = [getattr(self, name) for name in MESH_AXES]
        named = ", ".join(f"{n}={s}" for n, s in zip(MESH_AXES, sizes))
        fixed = math.prod(s for s in sizes if s != -1)
        if -1 in sizes:
            if num_devices % fixed:
                raise ValueError(
                    f"mesh ({named}) does not divide the {num_devices} devices; "
                    "change --config.mesh.* so the fixed sizes divide the device count"
                )
            sizes[sizes.index(-1)] = num_devices // fixed
        elif fixed != num_devices:
            raise ValueError(
                f"mesh ({named}) needs {fixed} devices but {num_devices} are available; "
                "change --config.mesh.* (or set one axis to -1)"
            )
        return tuple(sizes)


def make_mesh(
    data: int = 1, fsdp: int = -1, tensor: int = 1, devices: Sequence | None = None, context: int = 1
) -> Mesh:
    """A ("data", "fsdp", "tensor", "context") mesh with Auto axis types over `devices` (default: all); with
    `context = 1` the mesh has only the ("data", "fsdp", "tensor") axes.

    One of the sizes may be -1 (takes the remaining devices).

    Raises:
      ValueError: bad sizes, or sizes that do not multiply to the device count (`MeshConfig`).
    """
    devices = list(jax.devices() if devices is None else devices)
    sizes = MeshConfig(data, fsdp, tensor, context).resolve(len(devices))
    # Without context parallelism the mesh keeps its three axes (the "length" rule then falls back to
    # replication, as for any absent axis), so default meshes are unchanged.
    axes = MESH_AXES if sizes[3] > 1 else MESH_AXES[:3]
    return Mesh(device_grid(devices, sizes[: len(axes)]), axes, axis_types=(AxisType.Auto,) * len(axes))


def device_grid(devices: Sequence, shape: Sequence[int]) -> np.ndarray:
    """`devices` as an array of `shape`: on one TPU slice laid out along the rings of its torus
    (`jax.experimental.mesh_utils.create_device_mesh`), so that each mesh axis's collectives run between
    neighbours; elsewhere (CPU, GPU, several TPU slices) in the given order.

    The TPU compiler implements an all-gather over a group of chips that is not a ring of the torus as an
    all-reduce of a zero-padded buffer: in host order, the FSDP weight gathers of the 8B's v5p-128 step
    cost almost half as many temporaries again (docs/accelerators.md, "Targets").
    """
    single_slice = len({getattr(d, "slice_index", 0) for d in devices}) == 1
    if devices[0].platform == "tpu" and single_slice:
        return mesh_utils.create_device_mesh(tuple(shape), devices, allow_split_physical_axes=True)
    return np.asarray(devices).reshape(tuple(shape))


def logical_to_spec(
    logical_axes: Sequence[str | None],
    shape: Sequence[int],
    mesh_shape: dict[str, int],
    rules: dict[str, tuple[str, ...]] = LOGICAL_AXIS_RULES,
) -> PartitionSpec:
    """`PartitionSpec` for an array of `shape` whose dimensions have `logical_axes`, under the fallback rule.

    Raises:
      ValueError: a logical name missing from `rules`, or `logical_axes` and `shape` of different lengths.
    """
    if len(logical_axes) != len(shape):
        raise ValueError(f"logical axes {tuple(logical_axes)} do not match shape {tuple(shape)}")
    used: set[str] = set()
    spec = []
    for name, dim in zip(logical_axes, shape):
        if name is not None and name not in rules:
            raise ValueError(f"logical axis {name!r} has no rule; add it to LOGICAL_AXIS_RULES")
        axes, size = [], 1
        for axis in rules.get(name, ()) if name is not None else ():
            axis_size = mesh_shape.get(axis, 1)
            if axis in used or axis_size == 1 or dim % (size * axis_size):
                continue
            axes.append(axis)
            size *= axis_size
        used.update(axes)
        spec.append(None if not axes else axes[0] if len(axes) == 1 else tuple(axes))
    return PartitionSpec(*spec)


def _is_variable(x) -> bool:
    return isinstance(x, nnx.Variable)


def state_logical_axes(state: nnx.State) -> nnx.State:
    """The `logical_axes` metadata of every variable in `state` (same tree, tuples as values)."""
    return jax.tree.map(lambda v: v.replace(v.get_metadata()["logical_axes"]), state, is_leaf=_is_variable)


def state_shardings(
    state: nnx.State, mesh: Mesh, rules: dict[str, tuple[str, ...]] = LOGICAL_AXIS_RULES
) -> nnx.State:
    """`NamedSharding` of every variable in `state` (e.g. `nnx.state(model)`, its `nnx.eval_shape` twin, or
    an `nnx.Optimizer`'s state, whose moments inherit the parameters' metadata).

    Returns the same tree with each variable's value replaced by its sharding, usable as `out_shardings`
    of `jax.jit` or with `jax.device_put(state, shardings)`. Variables without `logical_axes` metadata
    (e.g. the optimizer step counter) are replicated.
    """
    mesh_shape = dict(mesh.shape)

    def sharding(v: nnx.Variable):
        axes = v.get_metadata().get("logical_axes", (None,) * len(v.shape))
        return v.replace(NamedSharding(mesh, logical_to_spec(axes, v.shape, mesh_shape, rules)))

    return jax.tree.map(sharding, state, is_leaf=_is_variable)


def constrain(
    x: jax.Array, logical_axes: Sequence[str | None], rules: dict[str, tuple[str, ...]] = LOGICAL_AXIS_RULES
) -> jax.Array:
    """Sharding constraint for activation `x` from its `logical_axes`; a no-op when no mesh is set.

    Uses the mesh of `jax.set_mesh(...)`: `with_sharding_constraint` on Auto axes, `reshard` on Explicit.
    """
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return x
    spec = logical_to_spec(logical_axes, x.shape, dict(mesh.shape), rules)
    if mesh.are_all_axes_explicit:
        return jax.sharding.reshard(x, spec)
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))
