"""Which parameters get weight decay (SPEC.md section 4)."""

from typing import Any

import jax
import numpy as np


def default_weight_decay_mask(params: Any) -> Any:
    """True where weight decay applies: on every parameter with `ndim >= 2`.

    The rule is by rank so it works on any pytree (dicts, `nnx.State`, linen params) without relying
    on names: matrices and embeddings (2-D) are decayed; norm scales and QK-norm weights (1-D), the
    xIELU scalars `a_p`/`a_n` (shape (1,)) and 0-D scalars are not. Source: SPEC.md section 4 (Apertus
    decays no 1-D parameter nor xIELU scalar; embeddings are decayed).

    Args:
      params: a pytree of arrays (or of `jax.ShapeDtypeStruct`s).

    Returns:
      A pytree of the same structure with Python bools as leaves, usable as an optax `mask`.
    """
    return jax.tree.map(lambda p: len(np.shape(p)) >= 2, params)
