"""Shardings of parameters, optimizer state and batches from logical axis names and a rule table.

The model names every parameter dimension with a logical axis ("embed", "mlp", "heads", "vocab", ...;
apertus_jax.models.partitioning); a rule table maps each logical name to mesh axes ("data", "fsdp",
"tensor"). Batches are split over ("data", "fsdp") on their leading (row) dimension.
"""

from typing import Any, Sequence

import jax
import optax
from absl import logging
from jax.sharding import NamedSharding, PartitionSpec as P

BATCH_AXES = ("data", "fsdp")


def logical_to_mesh_spec(logical: Sequence[str | None], shape: Sequence[int], rules: dict[str, Any],
                         mesh: jax.sharding.Mesh) -> P:
  """Maps logical dimension names to a mesh PartitionSpec.

  A dimension whose size is not divisible by its mesh axes' product, or whose mesh axis is already used by
  an earlier dimension, is replicated instead (e.g. 1 kv head on a tensor axis of 2) and logged.

  Args:
    logical: one logical name (or None) per dimension.
    shape: the array shape.
    rules: logical name -> mesh axis name, tuple of names, or None (replicated).
  """
  used, spec = set(), []
  for name, size in zip(logical, shape):
    axes = rules.get(name) if name is not None else None
    axes = (axes,) if isinstance(axes, str) else tuple(axes or ())
    axes = tuple(a for a in axes if mesh.shape[a] > 1)
    ways = 1
    for a in axes:
      ways *= mesh.shape[a]
    if not axes or used & set(axes) or size % ways:
      if axes:
        logging.log_first_n(logging.INFO, "dim %s of size %d replicated (mesh axes %s)", 20, name, size, axes)
      spec.append(None)
      continue
    used |= set(axes)
    spec.append(axes[0] if len(axes) == 1 else axes)
  return P(*spec)


def param_shardings(abstract_params, logical_specs, rules: dict[str, Any], mesh: jax.sharding.Mesh):
  """NamedShardings for a params tree, given a same-structured tree of logical PartitionSpecs."""
  return jax.tree.map(
      lambda x, logical: NamedSharding(mesh, logical_to_mesh_spec(tuple(logical), x.shape, rules, mesh)),
      abstract_params, logical_specs, is_leaf=lambda v: isinstance(v, P))


def opt_state_shardings(tx: optax.GradientTransformation, abstract_opt_state, params_shardings,
                        mesh: jax.sharding.Mesh):
  """Optimizer-state leaves shaped like params (moments) get the param's sharding; others are replicated."""
  replicated = NamedSharding(mesh, P())
  return optax.tree_map_params(tx, lambda _, s: s, abstract_opt_state, params_shardings,
                                     transform_non_params=lambda _: replicated)


def batch_sharding(mesh: jax.sharding.Mesh) -> NamedSharding:
  """[B, T] batch arrays: rows split over ("data", "fsdp"), positions replicated."""
  return NamedSharding(mesh, P(BATCH_AXES, None))


def make_global_batch(local_batch: dict, mesh: jax.sharding.Mesh) -> dict[str, jax.Array]:
  """Assembles the global batch from this process's rows (all processes call it with equal shapes)."""
  sharding = batch_sharding(mesh)
  return {k: jax.make_array_from_process_local_data(sharding, v) for k, v in local_batch.items()}
