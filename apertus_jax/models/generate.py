"""Autoregressive generation with a KV cache: greedy, temperature and nucleus (top-p) sampling.

Used by the memorization evaluation (docs/recipe.md section 9: prompt with a prefix, generate a 500-token suffix
greedily and with nucleus sampling at T = 1.0, top-p 0.9).

Layout: the prompts of a batch are left-padded to a common length P, so every row's next token lands in the
same cache column. Column c of the cache holds the keys/values of the token at column c; `valid` marks the
columns that hold real tokens. A query at column c attends key column j iff `j <= c` and `valid[j]`; positions
count real tokens only (0 at each prompt's first token), so left padding changes nothing in the numbers.

The decode path reuses the model's own pieces (`embed_tokens`, each block's `attn_norm`, `attn.project`,
`attn.output`, `mlp_norm`, `mlp`, and `head`) and swaps only the attention core for a cache lookup with
`attention.xla_attention` (float32 softmax), whatever `attention_impl` the model was configured with.
"""

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from apertus_jax.models.attention import xla_attention
from apertus_jax.models.transformer import Apertus


class KVCache(NamedTuple):
    """Keys and values of every layer for `S` columns, and which columns hold real tokens.

    k, v: `[n_layers, B, S, n_kv_heads, head_dim]` in the model's compute dtype (RoPE already applied to k).
    valid: `[B, S]` bool.
    """

    k: jax.Array
    v: jax.Array
    valid: jax.Array


def init_cache(model: Apertus, batch_size: int, length: int) -> KVCache:
    """An empty cache (zeros, nothing valid) for `batch_size` rows of `length` columns."""
    cfg = model.config
    shape = (cfg.n_layers, batch_size, length, cfg.n_kv_heads, cfg.head_dim)
    zeros = jnp.zeros(shape, jnp.dtype(cfg.dtype))
    return KVCache(k=zeros, v=zeros, valid=jnp.zeros((batch_size, length), jnp.bool_))


def cached_forward(
    model: Apertus,
    tokens_BxT: jax.Array,
    positions_BxT: jax.Array,
    valid_BxT: jax.Array,
    cache: KVCache,
    index: jax.Array,
) -> tuple[jax.Array, KVCache]:
    """Run `T` new tokens written at cache columns `[index, index + T)`; returns logits and the new cache.

    Args:
      tokens_BxT, positions_BxT: int32 `[B, T]`.
      valid_BxT: bool `[B, T]`, False for padding (its keys are never attended by real tokens).
      cache: the cache before this call; columns `>= index` are overwritten.
      index: int32 scalar, the first column of the new tokens.
    Returns:
      logits `[B, T, vocab]` float32 and the updated cache. The logits at real tokens equal those of the
      full forward `model(all tokens so far)` up to float rounding.
    """
    t = tokens_BxT.shape[1]
    valid_BxS = jax.lax.dynamic_update_slice(cache.valid, valid_BxT, (0, index))
    query_cols_T = index + jnp.arange(t)
    causal_TxS = jnp.arange(valid_BxS.shape[1])[None, :] <= query_cols_T[:, None]
    mask_Bx1xTxS = (causal_TxS[None] & valid_BxS[:, None, :])[:, None]

    def block_step(block, x_BxTxD, k_LxBxSxKxH, v_LxBxSxKxH, layer):
        # The whole cache is carried and updated in place at (layer, index): no per-step copy of it.
        q, k, v = block.attn.project(block.attn_norm(x_BxTxD), positions_BxT)
        start = (layer, 0, index, 0, 0)
        k_LxBxSxKxH = jax.lax.dynamic_update_slice(k_LxBxSxKxH, k[None].astype(k_LxBxSxKxH.dtype), start)
        v_LxBxSxKxH = jax.lax.dynamic_update_slice(v_LxBxSxKxH, v[None].astype(v_LxBxSxKxH.dtype), start)
        out_BxTxNxH = xla_attention(
            q, k_LxBxSxKxH[layer], v_LxBxSxKxH[layer], mask_Bx1xTxS, q.shape[-1] ** -0.5
        )
        h_BxTxD = x_BxTxD + block.attn.output(out_BxTxNxH)
        return h_BxTxD + block.mlp(block.mlp_norm(h_BxTxD)), k_LxBxSxKxH, v_LxBxSxKxH

    carry = (model.embed_tokens(tokens_BxT), cache.k, cache.v)
    if model.config.scan_layers:
        graphdef, state = nnx.split(model.layers)

        def scan_step(carry, layer_and_state):
            layer, state_l = layer_and_state
            return block_step(nnx.merge(graphdef, state_l), *carry, layer), None

        carry, _ = jax.lax.scan(scan_step, carry, (jnp.arange(model.config.n_layers), state))
    else:
        for layer, block in enumerate(model.layers):
            carry = block_step(block, *carry, layer)
    x_BxTxD, k_all, v_all = carry
    return model.head(x_BxTxD), KVCache(k=k_all, v=v_all, valid=valid_BxS)


def top_p_filter(logits_BxV: jax.Array, top_p: float) -> jax.Array:
    """Nucleus filter (Holtzman et al. 2020): keep the smallest set of most likely tokens whose probability
    mass reaches `top_p`; the others get -inf. Ties at the cut-off logit are all kept.

    logits `[B, V]` float32 -> same shape. `top_p` in (0, 1]; as `top_p -> 0` only the argmax survives.
    """
    sorted_BxV = jnp.sort(logits_BxV, axis=-1)[:, ::-1]
    probs_BxV = jax.nn.softmax(sorted_BxV, axis=-1)
    mass_before_BxV = jnp.cumsum(probs_BxV, axis=-1) - probs_BxV
    kept_BxV = mass_before_BxV < top_p
    cutoff_Bx1 = jnp.min(jnp.where(kept_BxV, sorted_BxV, jnp.inf), axis=-1, keepdims=True)
    return jnp.where(logits_BxV >= cutoff_Bx1, logits_BxV, -jnp.inf)


def sample_tokens(logits_BxV: jax.Array, rng: jax.Array, temperature: float, top_p: float) -> jax.Array:
    """Next tokens `[B]` int32: argmax when `temperature == 0`, else a draw from
    `softmax(top_p_filter(logits / temperature))`."""
    if temperature == 0.0:
        return jnp.argmax(logits_BxV, axis=-1).astype(jnp.int32)
    logits_BxV = logits_BxV.astype(jnp.float32) / temperature
    if top_p < 1.0:
        logits_BxV = top_p_filter(logits_BxV, top_p)
    return jax.random.categorical(rng, logits_BxV, axis=-1).astype(jnp.int32)


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Prompts of any lengths -> tokens `[B, P]` int32 (left-padded with `pad_id`) and valid `[B, P]` bool.

    Raises:
      ValueError: no prompts, or an empty prompt.
    """
    if not len(prompts):
        raise ValueError("generate: no prompts given; pass a list of token id sequences")
    lengths = [len(p) for p in prompts]
    if min(lengths) == 0:
        raise ValueError(
            f"generate: prompt {lengths.index(0)} is empty; every prompt needs at least one token"
        )
    width = max(lengths)
    tokens = np.full((len(prompts), width), pad_id, np.int32)
    valid = np.zeros((len(prompts), width), np.bool_)
    for row, prompt in enumerate(prompts):
        tokens[row, width - len(prompt) :] = np.asarray(prompt, np.int32)
        valid[row, width - len(prompt) :] = True
    return tokens, valid


def generate(
    model: Apertus,
    prompts: Sequence[Sequence[int]] | np.ndarray,
    *,
    max_new_tokens: int,
    segment_ids: np.ndarray | None = None,
    temperature: float = 0.0,
    top_p: float = 1.0,
    eos_id: int | None = None,
    pad_id: int = 3,
    seed: int = 0,
) -> np.ndarray:
    """Continue each prompt by up to `max_new_tokens` tokens with a KV cache (one jit-compiled loop).

    Args:
      model: an `Apertus` model (scanned or unscanned layers, any compute dtype).
      prompts: a list of token id sequences of any lengths, or a `[B, T]` int array together with
        `segment_ids` (`[B, T]`, nonzero marks prompt tokens), so left- or right-padded batches both work.
      max_new_tokens: number of tokens to generate (>= 1).
      temperature: 0 for greedy decoding, else the softmax temperature of sampling.
      top_p: nucleus mass in (0, 1] (1 = no filter); only used when sampling.
      eos_id: a row stops after emitting this token (it is included); None = never stop early.
      pad_id: filler after a row stopped (tekken pad = 3).
      seed: PRNG seed of sampling; equal seeds give equal samples.
    Returns:
      `[B, max_new_tokens]` int32 numpy array of generated tokens (prompts not included).
    Raises:
      ValueError: empty prompts, `max_new_tokens < 1`, `temperature < 0`, `top_p` outside (0, 1], a token id
        outside the vocabulary, or `segment_ids` whose shape differs from `prompts`.
    """
    if max_new_tokens < 1:
        raise ValueError(f"generate: max_new_tokens={max_new_tokens} must be >= 1")
    if temperature < 0:
        raise ValueError(f"generate: temperature={temperature} must be >= 0 (0 = greedy)")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"generate: top_p={top_p} must be in (0, 1] (1 = no nucleus filter)")
    if segment_ids is not None:
        prompts, segment_ids = np.asarray(prompts), np.asarray(segment_ids)
        if prompts.shape != segment_ids.shape or prompts.ndim != 2:
            raise ValueError(
                f"generate: prompts {prompts.shape} and segment_ids {segment_ids.shape} must be "
                f"equal [B, T] shapes"
            )
        prompts = [row[seg != 0] for row, seg in zip(prompts, segment_ids)]
    tokens_BxP, valid_BxP = left_pad(prompts, pad_id)
    vocab = model.config.vocab_size
    if tokens_BxP[valid_BxP].min() < 0 or tokens_BxP[valid_BxP].max() >= vocab:
        raise ValueError(f"generate: prompt token ids must lie in [0, {vocab}) (the model's vocabulary)")
    graphdef, state = nnx.split(model)
    out = _generate(
        graphdef,
        state,
        jnp.asarray(tokens_BxP),
        jnp.asarray(valid_BxP),
        jax.random.key(seed),
        jnp.int32(-1 if eos_id is None else eos_id),
        jnp.int32(pad_id),
        max_new_tokens=max_new_tokens,
        temperature=float(temperature),
        top_p=float(top_p),
    )
    return np.asarray(out)


@functools.partial(jax.jit, static_argnames=("graphdef", "max_new_tokens", "temperature", "top_p"))
def _generate(
    graphdef, state, tokens_BxP, valid_BxP, rng, eos_id, pad_id, *, max_new_tokens, temperature, top_p
):
    """Prefill the prompts, then a `while_loop` of single-token cached steps until done or full."""
    model = nnx.merge(graphdef, state)
    b, p = tokens_BxP.shape
    lengths_B = valid_BxP.sum(axis=1).astype(jnp.int32)
    positions_BxP = jnp.maximum(jnp.cumsum(valid_BxP, axis=1) - 1, 0).astype(jnp.int32)
    cache = init_cache(model, b, p + max_new_tokens)
    logits_BxPxV, cache = cached_forward(model, tokens_BxP, positions_BxP, valid_BxP, cache, jnp.int32(0))
    rng, key = jax.random.split(rng)
    first_B = sample_tokens(logits_BxPxV[:, -1], key, temperature, top_p)
    out_BxN = jnp.full((b, max_new_tokens), pad_id, jnp.int32).at[:, 0].set(first_B)

    def not_finished(carry):
        step, _, _, _, done_B, _ = carry
        return (step < max_new_tokens) & ~jnp.all(done_B)

    def decode_step(carry):
        # Feed the token generated at step - 1 (column p + step - 1, position length + step - 1).
        step, last_B, cache, out_BxN, done_B, rng = carry
        positions_Bx1 = (lengths_B + step - 1)[:, None]
        logits_Bx1xV, cache = cached_forward(
            model, last_B[:, None], positions_Bx1, jnp.ones((b, 1), jnp.bool_), cache, p + step - 1
        )
        rng, key = jax.random.split(rng)
        next_B = jnp.where(done_B, pad_id, sample_tokens(logits_Bx1xV[:, 0], key, temperature, top_p))
        out_BxN = jax.lax.dynamic_update_slice(out_BxN, next_B[:, None], (0, step))
        return step + 1, next_B, cache, out_BxN, done_B | (next_B == eos_id), rng

    carry = (jnp.int32(1), first_B, cache, out_BxN, first_B == eos_id, rng)
    return jax.lax.while_loop(not_finished, decode_step, carry)[3]
