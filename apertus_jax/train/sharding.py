"""Batch sharding: rows split over the ("data", "fsdp") mesh axes, the length over "context" (context
parallelism), assembled from per-process pieces.

A context group (the devices of one "context" row of the mesh, its innermost axis) should lie within one
process: each process then holds whole rows, as the data pipeline yields them.

Parameter and optimizer-state shardings come from the model's logical rule table
(`apertus_jax.models.partitioning`, used by `train_state.py`).
"""

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

BATCH_AXES = ("data", "fsdp")
LENGTH_AXIS = "context"


def batch_sharding(mesh: jax.sharding.Mesh) -> NamedSharding:
    """[B, T] batch arrays: rows split over ("data", "fsdp"); the length dimension split over "context" when
    the mesh has a context axis of size > 1, else replicated (T must then divide by the context size)."""
    length = LENGTH_AXIS if dict(mesh.shape).get(LENGTH_AXIS, 1) > 1 else None
    return NamedSharding(mesh, P(BATCH_AXES, length))


def make_global_batch(local_batch: dict[str, np.ndarray], mesh: jax.sharding.Mesh) -> dict[str, jax.Array]:
    """The global [B, T] batch from this process's [B / process_count, T] rows (same shapes on every process)."""
    sharding = batch_sharding(mesh)
    return {
        k: jax.make_array_from_process_local_data(sharding, np.asarray(v)) for k, v in local_batch.items()
    }
