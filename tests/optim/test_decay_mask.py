"""default_weight_decay_mask on plain pytrees and on an NNX model through nnx.Optimizer."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from apertus_jax.optim.decay_mask import default_weight_decay_mask
from apertus_jax.optim.factory import make_optimizer


def test_mask_decays_matrices_and_embeddings_only():
    params = {
        "embed": {"embedding": jnp.zeros((10, 4))},
        "layer": {
            "q_proj": jnp.zeros((4, 4)),
            "q_norm": jnp.zeros((4,)),
            "attention_norm": jnp.zeros((4,)),
            "xielu": {"a_p": jnp.zeros((1,)), "a_n": jnp.zeros((1,))},
            "stacked_kernel": jnp.zeros((2, 4, 4)),
        },
        "scalar": jnp.zeros(()),
    }
    assert default_weight_decay_mask(params) == {
        "embed": {"embedding": True},
        "layer": {
            "q_proj": True,
            "q_norm": False,
            "attention_norm": False,
            "xielu": {"a_p": False, "a_n": False},
            "stacked_kernel": True,
        },
        "scalar": False,
    }


def test_scanned_layers_keep_norms_and_xielu_scalars_undecayed():
    """With a leading layer axis, norm weights are 2-D and xIELU scalars [L, 1]: still never decayed."""
    stacked = {
        "embed": jnp.zeros((16, 8)),
        "final_norm": {"weight": jnp.zeros((8,))},
        "layers": {
            "attn": {"q_proj": jnp.zeros((2, 8, 2, 4)), "q_norm": {"weight": jnp.zeros((2, 4))}},
            "attn_norm": {"weight": jnp.zeros((2, 8))},
            "mlp": {"act": {"a_p": jnp.zeros((2, 1)), "a_n": jnp.zeros((2, 1))}, "up": jnp.zeros((2, 8, 12))},
        },
        "lm_head": jnp.zeros((8, 16)),
    }
    assert default_weight_decay_mask(stacked) == {
        "embed": True,
        "final_norm": {"weight": False},
        "layers": {
            "attn": {"q_proj": True, "q_norm": {"weight": False}},
            "attn_norm": {"weight": False},
            "mlp": {"act": {"a_p": False, "a_n": False}, "up": True},
        },
        "lm_head": True,
    }
    # HF names (docs/recipe.md 1) stacked the same way.
    hf = {
        "feedforward_layernorm": {"weight": jnp.zeros((2, 8))},
        "act_fn": {"alpha_p": jnp.zeros((2, 1)), "alpha_n": jnp.zeros((2, 1))},
        "up_proj": {"weight": jnp.zeros((2, 12, 8))},
    }
    assert default_weight_decay_mask(hf) == {
        "feedforward_layernorm": {"weight": False},
        "act_fn": {"alpha_p": False, "alpha_n": False},
        "up_proj": {"weight": True},
    }


def test_mask_works_on_abstract_shapes():
    abstract = {"w": jax.ShapeDtypeStruct((3, 4), jnp.float32), "b": jax.ShapeDtypeStruct((4,), jnp.float32)}
    assert default_weight_decay_mask(abstract) == {"w": True, "b": False}


class TinyModel(nnx.Module):
    def __init__(self, rngs):
        self.embed = nnx.Embed(7, 4, rngs=rngs)
        self.norm = nnx.RMSNorm(4, rngs=rngs)
        self.a_p = nnx.Param(jnp.full((1,), 0.8))

    def __call__(self, tokens):
        return self.norm(self.embed(tokens)) * self.a_p[...]


@pytest.mark.slow
def test_nnx_optimizer_decays_embedding_but_not_norm_or_xielu_scalar():
    model = TinyModel(nnx.Rngs(0))
    before = jax.tree.map(np.asarray, nnx.state(model, nnx.Param))
    tx = make_optimizer("ademamix", 0.5, weight_decay=0.1, clip_norm=1.0)
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    zero_grads = jax.tree.map(jnp.zeros_like, nnx.state(model, nnx.Param))
    optimizer.update(model, zero_grads)  # zero gradients: only weight decay moves params
    np.testing.assert_allclose(
        model.embed.embedding[...], before["embed"]["embedding"] * (1 - 0.5 * 0.1), rtol=1e-6
    )
    np.testing.assert_array_equal(model.norm.scale[...], before["norm"]["scale"])
    np.testing.assert_array_equal(model.a_p[...], before["a_p"])
