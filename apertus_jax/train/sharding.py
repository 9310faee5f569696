"""Batch sharding: rows split over the ("data", "fsdp") mesh axes, assembled from per-process pieces.

Parameter and optimizer-state shardings come from the model's logical rule table
(`apertus_jax.models.partitioning`, used by `train_state.py`).
"""

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

BATCH_AXES = ("data", "fsdp")


def batch_sharding(mesh: jax.sharding.Mesh) -> NamedSharding:
    """[B, T] batch arrays: rows split over ("data", "fsdp"), the length dimension replicated."""
    return NamedSharding(mesh, P(BATCH_AXES, None))


def make_global_batch(local_batch: dict[str, np.ndarray], mesh: jax.sharding.Mesh) -> dict[str, jax.Array]:
    """The global [B, T] batch from this process's [B / process_count, T] rows (same shapes on every process)."""
    sharding = batch_sharding(mesh)
    return {
        k: jax.make_array_from_process_local_data(sharding, np.asarray(v)) for k, v in local_batch.items()
    }
