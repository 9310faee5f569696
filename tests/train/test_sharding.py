"""Batch sharding: rows over ("data", "fsdp"), tensor axis replicated; the global batch from local rows."""

import jax
import numpy as np
import pytest

from apertus_jax.models import partitioning
from apertus_jax.train.sharding import BATCH_AXES, batch_sharding, make_global_batch


@pytest.mark.parametrize(("data", "fsdp", "tensor"), [(2, 2, 2), (1, 8, 1), (8, 1, 1), (1, 4, 2)])
def test_rows_split_over_data_times_fsdp(data, fsdp, tensor, text_batch):
    mesh = partitioning.make_mesh(data=data, fsdp=fsdp, tensor=tensor)
    sharding = batch_sharding(mesh)
    assert tuple(sharding.spec) == (BATCH_AXES, None)
    rows = 16
    shard_shape = sharding.shard_shape((rows, 24))
    assert shard_shape == (rows // (data * fsdp), 24)  # the length dimension is never split


def test_global_batch_holds_the_local_rows_on_one_process(text_batch):
    mesh = partitioning.make_mesh(data=2, fsdp=2, tensor=2)
    local = text_batch(8, 24)
    batch = make_global_batch(local, mesh)
    assert set(batch) == set(local)
    for key, value in batch.items():
        assert value.shape == (8, 24) and value.dtype == np.int32
        assert value.sharding == batch_sharding(mesh)
        np.testing.assert_array_equal(np.asarray(value), local[key])
    # Rows 0-1 live on the devices of the first (data, fsdp) cell, replicated over the tensor axis.
    first_cell = {d.id for d in mesh.devices[0, 0]}
    tokens = batch["tokens"]
    holders = {s.device.id for s in tokens.addressable_shards if s.index[0] == slice(0, 2)}
    assert holders == first_cell
    assert jax.process_count() == 1
