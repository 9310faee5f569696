"""Which parameters get weight decay (docs/recipe.md section 4)."""

import re
from typing import Any

import jax
import numpy as np

# Path keys of parameters that are never decayed whatever their rank: norm weights (RMSNorm, QK-norm;
# our `*_norm`, HF `*layernorm`/`norm`, linen `RMSNorm_0`) and the xIELU scalars (ours `a_p`/`a_n`,
# HF `alpha_p`/`alpha_n`).
_NORM_KEY = re.compile("norm", re.IGNORECASE)
_XIELU_KEYS = frozenset({"a_p", "a_n", "alpha_p", "alpha_n"})


def _key_name(entry: Any) -> str:
    """The name in one tree-path entry (dict key, attribute name or sequence index)."""
    for attribute in ("key", "name", "idx"):
        if hasattr(entry, attribute):
            return str(getattr(entry, attribute))
    return str(entry)


def _is_exempt(path: tuple) -> bool:
    names = [_key_name(entry) for entry in path]
    return any(_NORM_KEY.search(name) or name in _XIELU_KEYS for name in names)


def default_weight_decay_mask(params: Any) -> Any:
    """True where weight decay applies: parameters with `ndim >= 2` that are not norms or xIELU scalars.

    Matrices and embeddings (2-D and more) are decayed; 1-D and 0-D parameters (norm scales, QK-norm
    weights, the xIELU scalars `a_p`/`a_n` of shape (1,)) are not. With scanned layers
    (`ModelConfig.scan_layers`) every per-layer parameter gains a leading layer axis, so a stacked
    norm weight is `[layers, d_model]` and the xIELU scalars `[layers, 1]`: parameters whose tree path
    names a norm (a key containing "norm", any case) or an xIELU scalar (`a_p`, `a_n`, `alpha_p`,
    `alpha_n`) are therefore never decayed, whatever their rank. Works on any pytree (dicts,
    `nnx.State`, linen params). Source: docs/recipe.md section 4 (Apertus decays no 1-D parameter nor xIELU
    scalar; embeddings are decayed).

    Args:
      params: a pytree of arrays (or of `jax.ShapeDtypeStruct`s).

    Returns:
      A pytree of the same structure with Python bools as leaves, usable as an optax `mask`.
    """
    return jax.tree_util.tree_map_with_path(
        lambda path, p: len(np.shape(p)) >= 2 and not _is_exempt(path), params
    )
