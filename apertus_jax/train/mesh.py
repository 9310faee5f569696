"""Device mesh with the axes ("data", "fsdp", "tensor") used by every sharding rule.

`data` replicates parameters and splits the batch, `fsdp` splits the batch AND shards parameters and optimizer
state (ZeRO-3 style), `tensor` shards heads and MLP columns (Megatron-style tensor parallelism).
"""

import jax
import numpy as np

MESH_AXES = ("data", "fsdp", "tensor")


def resolve_mesh_shape(sizes: dict[str, int], num_devices: int) -> tuple[int, int, int]:
  """Returns the (data, fsdp, tensor) sizes with at most one -1 filled in.

  Args:
    sizes: mesh axis name -> size; -1 means "all remaining devices".
    num_devices: total number of devices (all processes).

  Raises:
    ValueError: more than one -1, a size < 1, or sizes whose product does not divide / equal num_devices.
  """
  shape = [int(sizes[name]) for name in MESH_AXES]
  fill = [i for i, size in enumerate(shape) if size == -1]
  if len(fill) > 1:
    raise ValueError(f"mesh {dict(zip(MESH_AXES, shape))}: at most one axis may be -1 (fill)")
  if any(size < 1 for i, size in enumerate(shape) if i not in fill):
    raise ValueError(f"mesh {dict(zip(MESH_AXES, shape))}: sizes must be >= 1 or -1 (fill)")
  fixed = int(np.prod([size for size in shape if size != -1]))
  if fill:
    if num_devices % fixed:
      raise ValueError(
          f"mesh {dict(zip(MESH_AXES, shape))} does not divide the {num_devices} devices; "
          "set --config.mesh.* so that the fixed axes divide the device count")
    shape[fill[0]] = num_devices // fixed
  elif fixed != num_devices:
    raise ValueError(
        f"mesh {dict(zip(MESH_AXES, shape))} has {fixed} devices but {num_devices} are available; "
        "set one axis to -1 or make the product equal the device count")
  return tuple(shape)


def make_mesh(sizes: dict[str, int], devices=None) -> jax.sharding.Mesh:
  """Builds the ("data", "fsdp", "tensor") mesh over `devices` (default: all devices of all processes).

  Axis types are Auto: shardings are given to `jax.jit` explicitly and XLA's partitioner propagates them
  through the model (the model's `with_sharding_constraint` hints need Auto axes, see JAX_NOTES.md).
  """
  devices = jax.devices() if devices is None else devices
  shape = resolve_mesh_shape(sizes, len(devices))
  return jax.make_mesh(shape, MESH_AXES, axis_types=(jax.sharding.AxisType.Auto,) * len(MESH_AXES),
                       devices=devices)
