"""The train state {"params", "opt_state"}: abstract shapes, shardings and sharded initialization; the batch's
sharding.

Parameters are kept as a plain nested dict of float32 arrays (`nnx.to_pure_dict`), so checkpoints
are plain trees; `nnx.merge(graphdef, params)` rebuilds the model inside the jitted step. `AbstractParams` is the
parameters alone (what evaluation, export and fine-tuning restore); `AbstractTrainState` adds the optimizer state,
each moment placed like its parameter (`opt_state_shardings`).
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import optax
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from apertus_jax.models.config import ModelConfig
from apertus_jax.models.transformer import param_layout


def _is_hole(x: Any) -> bool:
    return isinstance(x, optax.MaskedNode)


def opt_state_shardings(
    tx: optax.GradientTransformation, opt_state: Any, param_shardings: Any, other: Any
) -> Any:
    """The sharding of every leaf of `tx`'s state: a moment takes the sharding of its parameter, any other
    leaf (counters, Newton-Schulz coefficients) `other`.

    `optax.tree_map_params` with the holes of masked states kept: a state of `optax.partition` or
    `optax.masked` (Muon and AdamW branches, `apertus_jax.optim.orthogonal`) holds `optax.MaskedNode` where a
    branch has no parameter, which a plain `tree_map_params` over `param_shardings` cannot match.

    Args:
      tx: the transformation whose state it is (its `init` is called on a placeholder, nothing allocated).
      opt_state: `tx.init(params)` or its `jax.eval_shape` twin.
      param_shardings: one sharding per parameter, in the params' tree structure.
      other: the sharding of every leaf that is not a parameter-shaped moment (e.g. replicated).

    Returns:
      A tree of the structure of `opt_state` (MaskedNode holes included) with shardings as leaves.
    """
    return optax.tree_map_params(
        tx,
        lambda leaf, sharding: leaf if _is_hole(leaf) else sharding,
        opt_state,
        param_shardings,
        transform_non_params=lambda _: other,
        is_leaf=_is_hole,
    )


@dataclasses.dataclass(frozen=True)
class AbstractParams:
    """The model's parameters without allocating them.

    Attributes:
      apply_fn: (params, tokens[B,T], positions[B,T], segment_ids[B,T]) -> logits[B,T,V] float32.
      hidden_fn: same arguments -> (final hidden state [B,T,D] in compute dtype, output weights [D,V]), the
        inputs of the fused lm_head + loss (`apertus_jax.train.loss.fused_cross_entropy_sum`).
      shardings: tree of NamedSharding from the model's logical-axis rule table.
      abstract: the same tree of `jax.ShapeDtypeStruct` carrying those shardings (Orbax restore targets).
      create: () -> the initialized parameters (unjitted; `seed` fixes them).
    """

    apply_fn: Callable[..., jax.Array]
    hidden_fn: Callable[..., tuple[jax.Array, jax.Array]]
    shardings: Any
    abstract: Any
    create: Callable[[], Any]


def make_abstract_params(model_config: ModelConfig, mesh: jax.sharding.Mesh, seed: int) -> AbstractParams:
    """The model's parameter layout on `mesh` (`apertus_jax.models.transformer.param_layout`, no allocation)
    and its forward functions over plain parameter dicts."""
    layout = param_layout(model_config, mesh, seed)
    graphdef = layout.graphdef

    def apply_fn(params, tokens, positions, segment_ids):
        return nnx.merge(graphdef, params)(tokens, positions, segment_ids)

    def hidden_fn(params, tokens, positions, segment_ids):
        model = nnx.merge(graphdef, params)
        return model.final_hidden(tokens, positions, segment_ids), model.output_weights()

    return AbstractParams(
        apply_fn=apply_fn,
        hidden_fn=hidden_fn,
        shardings=layout.shardings,
        abstract=layout.abstract,
        create=layout.create,
    )


@dataclasses.dataclass(frozen=True)
class AbstractTrainState:
    """Everything the loop needs to build, shard and restore the train state without allocating it.

    Attributes:
      apply_fn: (params, tokens[B,T], positions[B,T], segment_ids[B,T]) -> logits[B,T,V] float32.
      hidden_fn: as `AbstractParams.hidden_fn`.
      shardings: {"params", "opt_state"} tree of NamedSharding (from the model's logical-axis rule table;
        optimizer moments follow their parameter, counters are replicated).
      abstract: the same tree of `jax.ShapeDtypeStruct` carrying those shardings (Orbax restore targets).
      init: () -> the initialized, sharded state (jitted; each device creates only its shards).
      init_opt_state: params -> a fresh, sharded optimizer state for them (jitted; fine-tuning from params).
    """

    apply_fn: Callable[..., jax.Array]
    hidden_fn: Callable[..., tuple[jax.Array, jax.Array]]
    shardings: dict[str, Any]
    abstract: dict[str, Any]
    init: Callable[[], dict[str, Any]]
    init_opt_state: Callable[[Any], Any]


def make_abstract_train_state(
    model_config: ModelConfig, tx: optax.GradientTransformation, mesh: jax.sharding.Mesh, seed: int
) -> AbstractTrainState:
    """The `AbstractParams` of the model plus the optimizer state of `tx`, and the sharded initializer."""
    params = make_abstract_params(model_config, mesh, seed)
    abstract_opt_state = jax.eval_shape(tx.init, params.abstract)
    replicated = NamedSharding(mesh, P())
    opt_shardings = opt_state_shardings(tx, abstract_opt_state, params.shardings, replicated)
    shardings = {"params": params.shardings, "opt_state": opt_shardings}
    abstract = {
        "params": params.abstract,
        "opt_state": jax.tree.map(
            lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract_opt_state, opt_shardings
        ),
    }

    def init_state():
        p = params.create()
        return {"params": p, "opt_state": tx.init(p)}

    return AbstractTrainState(
        apply_fn=params.apply_fn,
        hidden_fn=params.hidden_fn,
        shardings=shardings,
        abstract=abstract,
        init=jax.jit(init_state, out_shardings=shardings),
        init_opt_state=jax.jit(tx.init, in_shardings=(params.shardings,), out_shardings=opt_shardings),
    )


# Batch sharding: rows split over the ("data", "fsdp") mesh axes, the length over "context" (context
# parallelism), assembled from per-process pieces.
#
# A context group (the devices of one "context" row of the mesh, its innermost axis) should lie within one
# process: each process then holds whole rows, as the data pipeline yields them.
#
# Parameter and optimizer-state shardings come from the model's logical rule table
# (`apertus_jax.models.partitioning`, used by `train_state.py`).
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
