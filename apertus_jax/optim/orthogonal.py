"""Muon on the hidden matrices of a model whose parameter axes are named, AdamW on the rest (docs/optimizers.md).

The orthogonalization is that of `optax.contrib.muon` of the pinned optax (`optax.contrib.scale_by_muon`:
bias-corrected Nesterov momentum (docs/optimizers.md, "The momentum"), Frobenius pre-normalization,
Newton-Schulz quintic with coefficients (3.4445, -4.7750, 2.0315), 5 steps). What is ours is which parameter goes where and how its dimensions form a matrix, read from
each parameter's logical axes:

  - an axis named "layers" (scanned layers) is a batch axis: each layer's matrix is orthogonalized alone;
  - a parameter with a "vocab" axis (the input embedding, the lm_head), fewer than two other axes (norm
    weights, also stacked per layer), or an unnamed axis (the xIELU scalars) goes to AdamW;
  - every other parameter is a matrix from or to the model width "embed": when "embed" is its first
    non-batch axis it is the input, reduced over, and the remaining axes together are the output (q/k/v
    kernels reduce over "embed" into (heads, head_dim); MLP up and gate into "mlp"); when "embed" is the last
    axis the preceding axes are the input (the attention output projection from (heads, head_dim); MLP down
    from "mlp").

Both branches follow the same learning rate and the same weight-decay mask as AdEMAMix
(`default_weight_decay_mask`), decay multiplied by the learning rate. Under a mesh, each stack of matrices is
orthogonalized in its own layout (`orthogonalization_spec`), not in the parameters'.
"""

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from optax.contrib import MuonDimensionNumbers

from apertus_jax.optim.baselines import adamw
from apertus_jax.optim.ema_mixture import MaskOrFn

BATCH_AXES = ("layers",)
WIDTH_AXIS = "embed"
ADAM_AXES = ("vocab",)


def _is_number(x: Any) -> bool:
    return x is None or isinstance(x, MuonDimensionNumbers)


def _is_axes(x: Any) -> bool:
    return isinstance(x, tuple) and all(name is None or isinstance(name, str) for name in x)


def _dimension_numbers(
    path: tuple, axes: tuple, batch_axes: Sequence[str], width_axis: str, adam_axes: Sequence[str]
) -> MuonDimensionNumbers | None:
    """The dimension numbers of one parameter with logical `axes`, or None for AdamW (module docstring)."""
    matrix = [i for i, name in enumerate(axes) if name not in batch_axes]
    names = [axes[i] for i in matrix]
    if len(matrix) < 2 or None in names or any(name in adam_axes for name in names):
        return None
    if names.count(width_axis) == 1 and names[0] == width_axis:
        return MuonDimensionNumbers(reduction_axis=(matrix[0],), output_axis=tuple(matrix[1:]))
    if names.count(width_axis) == 1 and names[-1] == width_axis:
        return MuonDimensionNumbers(reduction_axis=tuple(matrix[:-1]), output_axis=(matrix[-1],))
    raise ValueError(
        f"parameter {jax.tree_util.keystr(path)} with logical axes {axes}: a Muon matrix needs "
        f"{width_axis!r} exactly once, as its first or last axis besides {tuple(batch_axes)}; name it, or "
        f"add one of its axes to adam_axes"
    )


def muon_dimension_numbers(
    logical_axes: Any,
    *,
    batch_axes: Sequence[str] = BATCH_AXES,
    width_axis: str = WIDTH_AXIS,
    adam_axes: Sequence[str] = ADAM_AXES,
) -> Any:
    """Which parameters Muon orthogonalizes, and over which dimensions (the rule of the module docstring).

    Args:
      logical_axes: a pytree with one tuple of axis names (str, or None for an unnamed dimension) per
        parameter, e.g. `nnx.to_pure_dict(state_logical_axes(nnx.state(model, nnx.Param)))`
        (`apertus_jax.models.partitioning.state_logical_axes`).
      batch_axes: names of axes along which independent matrices are stacked (scanned layers).
      width_axis: the model-width axis that every hidden matrix reads from or writes to.
      adam_axes: a parameter with any of these axes goes to AdamW (embeddings and output head).

    Returns:
      The same tree with an `optax.contrib.MuonDimensionNumbers` (reduction axes = the input, output axes =
      the output, all other axes batch axes) for each Muon parameter and None for each AdamW parameter: the
      `muon_weight_dimension_numbers` of `optax.contrib.muon`.

    Raises:
      ValueError: a parameter that is a matrix by the rule but has `width_axis` more than once or not at
        either end of its non-batch axes (one line naming the parameter's path and axes).
    """
    return jax.tree_util.tree_map_with_path(
        lambda path, axes: _dimension_numbers(path, tuple(axes), batch_axes, width_axis, adam_axes),
        logical_axes,
        is_leaf=_is_axes,
    )


def muon_assignment(logical_axes: Any, **rule: Any) -> dict[str, str]:
    """A readable listing of `muon_dimension_numbers(logical_axes, **rule)`: parameter path -> "adam" or
    "muon: <input axes> -> <output axes>" (axis names; "layers" axes are batch axes and not shown).

    Raises:
      ValueError: as `muon_dimension_numbers`.
    """
    numbers = muon_dimension_numbers(logical_axes, **rule)
    flat_axes = jax.tree_util.tree_flatten_with_path(logical_axes, is_leaf=_is_axes)[0]
    flat_numbers = jax.tree.leaves(numbers, is_leaf=_is_number)
    listing = {}
    for (path, axes), number in zip(flat_axes, flat_numbers):
        if number is None:
            listing[jax.tree_util.keystr(path)] = "adam"
        else:
            inputs = " x ".join(axes[i] for i in number.reduction_axis)
            outputs = " x ".join(axes[i] for i in number.output_axis)
            listing[jax.tree_util.keystr(path)] = f"muon: {inputs} -> {outputs}"
    return listing


def _scale_by_shape(numbers: Any, rms: float) -> optax.GradientTransformation:
    """Multiplies each orthogonalized update by `rms * sqrt(max(fan_in, fan_out))`, or with `rms = 0` by
    `sqrt(max(1, fan_out / fan_in))`; fan_in / fan_out are the products of the reduction / output dimension
    sizes of `numbers` (the two scalings `optax.contrib.muon` offers, docs/optimizers.md)."""

    def scale(update, number):
        fan_in = math.prod(update.shape[i] for i in number.reduction_axis)
        fan_out = math.prod(update.shape[i] for i in number.output_axis)
        # float32 arithmetic in optax's order, so that a Muon update is bitwise that of optax.contrib.muon.
        if rms:
            factor = jnp.sqrt(jnp.maximum(fan_in, fan_out)) * rms
        else:
            factor = jnp.sqrt(jnp.maximum(1, fan_out / fan_in))
        return (factor * update).astype(update.dtype)

    def update_fn(updates, state, params=None):
        del params
        return jax.tree.map(scale, updates, numbers, is_leaf=_is_number), state

    return optax.GradientTransformation(optax.init_empty_state, update_fn)


def _as_matrices(x: jax.Array, number: MuonDimensionNumbers) -> jax.Array:
    """`x` as [batch, fan_in, fan_out]: batch axes, then input axes, then output axes, each group flattened
    (the layout `optax.contrib.scale_by_muon` orthogonalizes)."""
    batch = [i for i in range(x.ndim) if i not in number.reduction_axis + number.output_axis]
    x = x.transpose(batch + list(number.reduction_axis) + list(number.output_axis))
    sizes = [
        math.prod(x.shape[: len(batch)]),
        math.prod(x.shape[len(batch) : x.ndim - len(number.output_axis)]),
    ]
    return x.reshape(sizes[0], sizes[1], -1)


def _from_matrices(x: jax.Array, number: MuonDimensionNumbers, shape: tuple[int, ...]) -> jax.Array:
    """The inverse of `_as_matrices` for a parameter of `shape`."""
    batch = [i for i in range(len(shape)) if i not in number.reduction_axis + number.output_axis]
    order = batch + list(number.reduction_axis) + list(number.output_axis)
    x = x.reshape([shape[i] for i in order])
    return x.transpose([order.index(i) for i in range(len(shape))])


def orthogonalization_spec(shape: tuple[int, int, int], mesh_shape: dict[str, int]) -> P:
    """Where the matrices of a [batch, fan_in, fan_out] stack lie during Newton-Schulz (docs/optimizers.md).

    Each mesh axis of size > 1, in mesh order, splits the batch axis (stacked layers) if it divides what is
    left of it, else the longer matrix side, the one the iteration's X X^T contracts (if it divides); else
    the devices of that axis compute the same matrices. Whole matrices on a device need no communication;
    a split longer side costs one all-reduce of the [short, short] product X X^T per iteration, where a
    split shorter side (the parameters' own fsdp/tensor layout) makes the compiler gather whole matrices.

    Args:
      shape: (batch, fan_in, fan_out) sizes.
      mesh_shape: mesh axis name -> size, in mesh order.

    Returns:
      A `PartitionSpec` of the three dimensions.
    """
    # optax orients each matrix so that the contracted side is the longer one (fan_out on a tie).
    longer = 1 if shape[1] > shape[2] else 2
    axes: list[list[str]] = [[], [], []]
    for axis, size in mesh_shape.items():
        for dim in (0, longer):
            if size > 1 and shape[dim] % (math.prod(mesh_shape[a] for a in axes[dim]) * size) == 0:
                axes[dim].append(axis)
                break
    return P(*(None if not a else a[0] if len(a) == 1 else tuple(a) for a in axes))


def _in_orthogonalization_layout(numbers: Any, momentum: float, eps: float) -> optax.GradientTransformation:
    """`optax.contrib.scale_by_muon` on each Muon parameter viewed as a [batch, fan_in, fan_out] stack placed
    by `orthogonalization_spec` on the mesh of `jax.set_mesh` (no placement without one). The momentum is
    stored in the parameter's own shape (and sharding); the update returns in it."""
    stacked = MuonDimensionNumbers(reduction_axis=(1,), output_axis=(2,))
    inner = optax.contrib.scale_by_muon(
        beta=momentum,
        eps=eps,
        weight_dimension_numbers=jax.tree.map(lambda n: stacked, numbers, is_leaf=_is_number),
    )

    def place(x):
        mesh = jax.sharding.get_abstract_mesh()
        if mesh.empty:
            return x
        spec = orthogonalization_spec(x.shape, dict(mesh.shape))
        if mesh.are_all_axes_explicit:
            return jax.sharding.reshard(x, spec)
        return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))

    def to_matrices(tree):
        return jax.tree.map(lambda x, n: place(_as_matrices(x, n)), tree, numbers, is_leaf=_is_number)

    def from_matrices(tree, like):
        # Placed again on the way out: otherwise the compiler carries the parameter layout back into the
        # iterations and gathers whole matrices there.
        return jax.tree.map(
            lambda x, n, p: _from_matrices(place(x), n, p.shape), tree, numbers, like, is_leaf=_is_number
        )

    def update_fn(updates, state, params=None):
        del params
        stacked_state = state._replace(mu=to_matrices(state.mu))
        directions, stacked_state = inner.update(to_matrices(updates), stacked_state)
        state = stacked_state._replace(mu=from_matrices(stacked_state.mu, state.mu))
        return from_matrices(directions, updates), state

    return optax.GradientTransformation(inner.init, update_fn)


def muon(
    learning_rate: optax.ScalarOrSchedule,
    logical_axes: Any,
    momentum: float = 0.95,
    rms: float = 0.2,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    mask: MaskOrFn = None,
) -> optax.GradientTransformation:
    """Muon on the hidden matrices named by `logical_axes`, AdamW on the rest (docs/optimizers.md).

    An `optax.partition` of two branches labelled by `muon_dimension_numbers(logical_axes)`:
      "muon": `optax.contrib.scale_by_muon` on each matrix viewed by those dimension numbers as a [batch,
        fan_in, fan_out] stack (Nesterov momentum `momentum`, 5 Newton-Schulz steps on each matrix, per layer
        when layers are stacked), placed by `orthogonalization_spec` on the mesh of `jax.set_mesh` while it is
        orthogonalized (docs/optimizers.md, "Memory and the distributed update"), the orthogonalized update
        scaled by `rms * sqrt(max(fan_in, fan_out))` (update RMS `rms` per unit learning rate, like AdamW's:
        Moonlight's RMS matching), or with `rms = 0` by `sqrt(max(1, fan_out / fan_in))` (Keller Jordan's
        reference); fan_in / fan_out are the products of the input / output dimension sizes;
      "adam": `adamw` (b1, b2, eps) for embeddings, lm_head, norms and xIELU scalars.
    Both decay where `mask` is True by `weight_decay` times the learning rate and move by `learning_rate`.
    On Muon parameters this is `optax.contrib.muon` with the same dimension numbers and `consistent_rms`;
    its own Adam branch is not used because it decays all of its parameters or none (no mask) and uses
    Nesterov momentum, where the sources use plain AdamW.

    The labels are fixed at construction (no function of the params), so the state can be placed without
    allocating it; the Muon momentum holds only the Muon parameters and AdamW's moments only the others
    (`optax.MaskedNode` elsewhere), which `opt_state_shardings` keeps and a plain `optax.tree_map_params`
    cannot match.

    Args:
      learning_rate: float or optax schedule of the 0-based update count, shared by both branches.
      logical_axes: one tuple of axis names per parameter (see `muon_dimension_numbers`), in the tree
        structure of the params.
      momentum: Muon's momentum decay (Keller Jordan and Moonlight: 0.95).
      rms: target RMS of a Muon update per unit learning rate (Moonlight: 0.2); 0 selects the reference
        width scaling.
      b1, b2, eps: AdamW's moment decays and denominator epsilon (eps also guards Muon's Frobenius norm).
      weight_decay: decoupled decay coefficient, multiplied by the learning rate.
      mask: weight-decay mask (pytree of bools or callable such as `default_weight_decay_mask`); None: all.

    Returns:
      An `optax.GradientTransformation`; its state holds one momentum buffer per Muon parameter and two
      (AdamW moments) per AdamW parameter, in the parameters' dtypes.

    Raises:
      ValueError: `rms` < 0 or `momentum` outside [0, 1); as `muon_dimension_numbers`.
    """
    if rms < 0:
        raise ValueError(f"rms must be >= 0 (0 = reference width scaling), got {rms!r}")
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"momentum must be in [0, 1), got {momentum!r}")
    numbers = muon_dimension_numbers(logical_axes)
    labels = jax.tree.map(lambda n: "adam" if n is None else "muon", numbers, is_leaf=_is_number)
    # Inside the partition the Muon branch sees MaskedNode where AdamW's parameters are.
    holed = jax.tree.map(lambda n: optax.MaskedNode() if n is None else n, numbers, is_leaf=_is_number)
    matrices = optax.chain(
        _in_orthogonalization_layout(holed, momentum, eps),
        _scale_by_shape(holed, rms),
        optax.add_decayed_weights(weight_decay, mask),
        optax.scale_by_learning_rate(learning_rate),
    )
    rest = adamw(learning_rate, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay, mask=mask)
    return optax.partition({"muon": matrices, "adam": rest}, labels)
