"""The Apertus decoder-only Transformer (docs/recipe.md section 1) with optional layer scan and remat.

    h      = x + Attention(RMSNorm_attn(x))
    out    = h + MLP(RMSNorm_mlp(h))
    logits = lm_head(RMSNorm_final(out))      (lm_head = embed^T when tie_embeddings)

Layer layouts (`ModelConfig.scan_layers`):
  unscanned: `model.layers` is an `nnx.List` of `Block`s.
  scanned:   `model.layers` is ONE `Block` whose every parameter has a leading axis of size `n_layers`
             (logical axis "layers" prepended), run with `jax.lax.scan`.
Both layouts draw the same random numbers, so `Apertus(cfg, rngs=nnx.Rngs(s))` has identical weights either
way. `export_weights` / `import_weights` read and write a flat, layout-independent dict of arrays.
"""

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from apertus_jax.models.attention import Attention
from apertus_jax.models.config import ModelConfig
from apertus_jax.models.layers import MLP, RMSNorm, dense, normal_param, wide
from apertus_jax.models.partitioning import constrain, make_mesh, state_logical_axes, state_shardings

REMAT_POLICIES = {
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots_saveable": jax.checkpoint_policies.dots_saveable,
    "dots_with_no_batch_dims_saveable": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


class Block(nnx.Module):
    """One pre-norm decoder layer: `attn_norm`, `attn`, `mlp_norm`, `mlp`."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        self.attn_norm = RMSNorm(config.d_model, config.rms_norm_eps, "embed")
        self.attn = Attention(config, rngs=rngs)
        self.mlp_norm = RMSNorm(config.d_model, config.rms_norm_eps, "embed")
        self.mlp = MLP(config, rngs=rngs)

    def __call__(self, x_BxTxD: jax.Array, positions_BxT: jax.Array, segment_ids_BxT: jax.Array) -> jax.Array:
        """Residual stream `[B, T, d_model]` in compute dtype -> same."""
        h_BxTxD = x_BxTxD + self.attn(self.attn_norm(x_BxTxD), positions_BxT, segment_ids_BxT)
        out_BxTxD = h_BxTxD + self.mlp(self.mlp_norm(h_BxTxD))
        return constrain(out_BxTxD, ("batch", "length", "embed"))


def _stack_blocks(blocks: list[Block]) -> Block:
    """One `Block` whose parameters stack those of `blocks` on a new leading "layers" axis."""
    graphdef, first = nnx.split(blocks[0])
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), first, *[nnx.state(b) for b in blocks[1:]])
    for _, var in nnx.to_flat_state(stacked):
        var.set_metadata(logical_axes=("layers", *var.get_metadata()["logical_axes"]))
    return nnx.merge(graphdef, stacked)


class Apertus(nnx.Module):
    """Decoder-only Transformer; see the module docstring for the layer layouts.

    Parameters: `embed` `[vocab, d_model]` ("vocab", "embed"); `layers`; `final_norm`; `lm_head`
    `[d_model, vocab]` ("embed", "vocab"), None when `tie_embeddings`. All float32, N(0, init_std) for
    matrices, ones for norms, xIELU scalars at alpha_p = alpha_n = 0.8.
    """

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        self.config = config
        self.embed = normal_param(
            rngs, (config.vocab_size, config.d_model), ("vocab", "embed"), config.init_std
        )
        blocks = [Block(config, rngs=rngs) for _ in range(config.n_layers)]
        self.layers = _stack_blocks(blocks) if config.scan_layers else nnx.List(blocks)
        self.final_norm = RMSNorm(config.d_model, config.rms_norm_eps, "embed")
        self.lm_head = (
            None
            if config.tie_embeddings
            else normal_param(rngs, (config.d_model, config.vocab_size), ("embed", "vocab"), config.init_std)
        )

    def __call__(self, tokens: jax.Array, positions: jax.Array, segment_ids: jax.Array) -> jax.Array:
        """Logits for packed rows.

        Args:
          tokens: `[B, T]` int32 token ids in [0, vocab_size): not checked, as values cannot be under `jit`; an
            id outside gives NaN logits (`generate` checks its prompts).
          positions: `[B, T]` int32, restarting at 0 for every document.
          segment_ids: `[B, T]` int32, 1.. per document within a row, 0 for padding.
        Returns:
          logits `[B, T, vocab]` float32 (matmul inputs in compute dtype, float32 accumulation; float64 for
          a float64 model).
        Raises:
          ValueError: the three inputs are not `[B, T]` arrays of one shape.
        """
        if tokens.ndim != 2 or positions.shape != tokens.shape or segment_ids.shape != tokens.shape:
            raise ValueError(
                f"tokens, positions and segment_ids must be [B, T] arrays of one shape, got {tokens.shape}, "
                f"{positions.shape} and {segment_ids.shape}"
            )
        x_BxTxD = self.embed_tokens(tokens)
        x_BxTxD = self._run_layers(x_BxTxD, positions, segment_ids)
        return self.head(x_BxTxD)

    def embed_tokens(self, tokens: jax.Array) -> jax.Array:
        """Token ids `[B, T]` int32 -> residual stream `[B, T, d_model]` in compute dtype."""
        # The table is never gathered whole (vocab x d_model: 2.1 GB per chip for the 8B in float32): the ids of
        # the fsdp group's rows are (4 bytes a token), each device looks up its own "embed" slice of the table
        # for all of them, and one all-to-all within the group hands each device its rows.
        tokens_BxT = constrain(tokens, ("replica_batch", "length"))
        x_BxTxD = jnp.take(self.embed[...], tokens_BxT, axis=0).astype(jnp.dtype(self.config.dtype))
        x_BxTxD = constrain(x_BxTxD, ("replica_batch", "length", "embed"))
        return constrain(x_BxTxD, ("batch", "length", "embed"))

    def head(self, x_BxTxD: jax.Array) -> jax.Array:
        """Final RMSNorm and output projection (`embed^T` when tied): `[B, T, d_model]` -> logits in
        `wide(dtype)` (float32; float64 for a float64 model)."""
        dtype = jnp.dtype(self.config.dtype)
        x_BxTxD = self.final_norm(x_BxTxD)
        logits_BxTxV = dense(x_BxTxD, self.output_weights().astype(dtype), preferred_element_type=wide(dtype))
        return constrain(logits_BxTxV, ("batch", "length", "vocab"))

    def output_weights(self) -> jax.Array:
        """The output projection `[d_model, vocab]` float32 (`embed^T` when `tie_embeddings`)."""
        return self.embed[...].T if self.lm_head is None else self.lm_head[...]

    def final_hidden(self, tokens: jax.Array, positions: jax.Array, segment_ids: jax.Array) -> jax.Array:
        """The normalized final hidden state `[B, T, d_model]` in compute dtype: `__call__` without the
        output projection, for losses that apply it chunk by chunk (`apertus_jax.train.loss`).

        `logits = final_hidden(...) @ output_weights()` (matmul in compute dtype, float32 accumulation).
        """
        x_BxTxD = self._run_layers(self.embed_tokens(tokens), positions, segment_ids)
        return self.final_norm(x_BxTxD)

    def _run_layers(self, x_BxTxD, positions_BxT, segment_ids_BxT):
        """All blocks, each under `jax.checkpoint` with the remat policy; scanned or as a Python loop."""

        def layer_fn(x, graphdef, state):
            return nnx.merge(graphdef, state)(x, positions_BxT, segment_ids_BxT)

        policy = self.config.remat_policy
        if policy != "none":
            # CSE prevention is only needed outside scan (JAX docs of jax.checkpoint).
            layer_fn = jax.checkpoint(
                layer_fn,
                policy=REMAT_POLICIES[policy],
                static_argnums=(1,),
                prevent_cse=not self.config.scan_layers,
            )
        if self.config.scan_layers:
            graphdef, state = nnx.split(self.layers)
            x_BxTxD, _ = jax.lax.scan(lambda x, s: (layer_fn(x, graphdef, s), None), x_BxTxD, state)
            return x_BxTxD
        for block in self.layers:
            x_BxTxD = layer_fn(x_BxTxD, *nnx.split(block))
        return x_BxTxD


@dataclasses.dataclass(frozen=True)
class ParamLayout:
    """The parameters of an `Apertus` without allocating them.

    Attributes:
      graphdef: the model's structure (`nnx.merge(graphdef, params)` rebuilds it; params a pure dict).
      shardings: the pure-dict tree of NamedSharding from the logical-axis rule table (`state_shardings`).
      abstract: the same tree of `jax.ShapeDtypeStruct` carrying those shardings.
      create: () -> the initialized parameters as a pure dict (unjitted; `seed` fixes them; jit it with
        `out_shardings=shardings` so each device creates only its shards).
    """

    graphdef: nnx.GraphDef
    shardings: dict
    abstract: dict
    create: Callable[[], dict]


def param_layout(config: ModelConfig, mesh: Mesh, seed: int = 0) -> ParamLayout:
    """The `ParamLayout` of `Apertus(config, rngs=nnx.Rngs(seed))` on `mesh` (nothing allocated)."""

    def create() -> dict:
        return nnx.to_pure_dict(nnx.state(Apertus(config, rngs=nnx.Rngs(seed)), nnx.Param))

    graphdef, abstract_state = abstract_model(config)  # the seed changes values, not shapes
    shardings = nnx.to_pure_dict(state_shardings(abstract_state, mesh))
    abstract = jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
        nnx.to_pure_dict(abstract_state),
        shardings,
    )
    return ParamLayout(graphdef, shardings, abstract, create)


def create_model(config: ModelConfig, *, seed: int = 0, mesh: Mesh | None = None) -> Apertus:
    """`Apertus(config, rngs=nnx.Rngs(seed))` initialised in ONE compiled program.

    Same random numbers as eager construction (values equal up to float rounding, ~1e-8), but one compile
    instead of one per operation.

    With `mesh`, every parameter is created directly with its `state_shardings` sharding (never whole
    on one device, `param_layout`); without, on the default device.
    """
    layout = param_layout(config, mesh or make_mesh(1, 1, 1, jax.devices()[:1]), seed)
    params = jax.jit(layout.create, out_shardings=layout.shardings)()
    return model_from_params(config, params)


def model_from_params(config: ModelConfig, params: dict) -> Apertus:
    """An `Apertus` holding `params`, the trainer's plain nested dict of parameters
    (`nnx.to_pure_dict(nnx.state(model, nnx.Param))` layout); nothing is initialized or compiled."""
    graphdef, state = abstract_model(config)
    state = jax.tree.map(lambda x: x, state)  # a fresh copy: the cached abstract state stays untouched
    nnx.replace_by_pure_dict(state, params)
    return nnx.merge(graphdef, state)


def param_logical_axes(config: ModelConfig) -> dict:
    """The logical axes of every parameter of `Apertus(config)` (a tuple of rule-table names per parameter, in
    the trainer's pure-dict layout; nothing allocated): what Muon maps to matrix dimensions."""
    return nnx.to_pure_dict(state_logical_axes(abstract_model(config)[1]))


@functools.cache
def abstract_model(config: ModelConfig) -> tuple[nnx.GraphDef, nnx.State]:
    """(graphdef, abstract `nnx.Param` state: `jax.ShapeDtypeStruct`s) of `Apertus(config)`, traced once per
    config and shared by every caller (layouts, logical axes, parameter counts, HF export): a memory plan lays
    one config out on several meshes, and tracing the 80 blocks of a 70B takes 0.4 s. Never mutate it: map it
    to a new state (`jax.tree.map`)."""
    return nnx.split(nnx.eval_shape(lambda: Apertus(config, rngs=_ShapesOnlyRngs())), nnx.Param)


class _ShapesOnlyRngs:
    """Stands in for `nnx.Rngs` where only shapes matter (`abstract_model`): `params()` gives one fixed key.
    An `nnx.Rngs` counts its draws in a variable, which is a tracer under `nnx.eval_shape`; flax asks each new
    count for its sharding, and jax builds that AttributeError's message by walking the whole trace so far.
    Once per parameter, so quadratic in the layers: 2.4 of the 2.8 s the 70B took."""

    def params(self) -> jax.Array:
        return jax.random.key(0)


def export_weights(model: Apertus) -> dict[str, jax.Array]:
    """All parameters as a flat dict with layout-independent names.

    Keys: "embed", "final_norm.weight", "lm_head" (absent when tied), and per layer i
    "layers.{i}.attn_norm.weight", "layers.{i}.attn.{q,k,v,o}_proj", "layers.{i}.attn.{q,k}_norm.weight"
    (QK-norm only), "layers.{i}.mlp_norm.weight", "layers.{i}.mlp.{up,down}", "layers.{i}.mlp.gate" (SwiGLU),
    "layers.{i}.mlp.act.{a_p,a_n}" (xIELU). Array shapes as in the module docstrings (kernels `[in, out]`
    with heads split out); scanned models are unstacked.
    """
    weights = {}
    for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        name = ".".join(str(p) for p in path)
        if model.config.scan_layers and path[0] == "layers":
            rest = ".".join(str(p) for p in path[1:])
            weights.update({f"layers.{i}.{rest}": var[...][i] for i in range(model.config.n_layers)})
        else:
            weights[name] = var[...]
    return weights


def import_weights(model: Apertus, weights: dict) -> None:
    """Set every parameter of `model` in place from a dict in the `export_weights` layout.

    Raises:
      ValueError: missing or unexpected keys, or a shape that differs from the model's.
    """
    expected = {k: v.shape for k, v in export_weights(model).items()}
    if set(weights) != set(expected):
        missing, extra = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
        raise ValueError(f"import_weights: missing keys {missing[:5]}, unexpected keys {extra[:5]}")
    for key, shape in expected.items():
        if tuple(weights[key].shape) != tuple(shape):
            raise ValueError(f"import_weights: {key} has shape {tuple(weights[key].shape)}, expected {shape}")
    n = model.config.n_layers
    for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        name = ".".join(str(p) for p in path)
        if model.config.scan_layers and path[0] == "layers":
            rest = ".".join(str(p) for p in path[1:])
            value = jnp.stack([jnp.asarray(weights[f"layers.{i}.{rest}"]) for i in range(n)])
        else:
            value = jnp.asarray(weights[name])
        var[...] = value.astype(var[...].dtype)
