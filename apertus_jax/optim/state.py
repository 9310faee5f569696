"""Placing an optimizer state like its parameters, also when a branch holds only some of them."""

from typing import Any

import optax


def _is_hole(x: Any) -> bool:
    return isinstance(x, optax.MaskedNode)


def opt_state_shardings(
    tx: optax.GradientTransformation, opt_state: Any, param_shardings: Any, other: Any
) -> Any:
    """The sharding of every leaf of `tx`'s state: a moment takes the sharding of its parameter, any other
    leaf (counters, Newton-Schulz coefficients) `other`.

    `optax.tree_map_params` with the holes of masked states kept: a state of `optax.partition` or
    `optax.masked` (Muon and AdamW branches, `apertus_jax.optim.muon`) holds `optax.MaskedNode` where a
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
