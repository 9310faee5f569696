"""Parameter counts (by `nnx.eval_shape`, no allocation) and per-operation FLOPs (docs/recipe.md section 10).

FLOP conventions (one multiply-add = 2 FLOPs; per sequence of `seq_len` tokens):
  * matmuls: 2 * m * n * k for q/k/v/o projections, QK^T, AV, MLP and logits. Attention scores count the
    full T x T square (no causal discount), as the Megatron-LM / Apertus accounting does.
  * elementwise: softmax 5 per score (scale, max-subtract, exp, sum, divide); RMSNorm 4 per element
    (square, sum, rsqrt scale, weight); RoPE 3 per q/k element; xIELU 4 and SwiGLU 5 (silu 4 + gate
    product) per hidden element; residual adds 1 per element. Embedding lookup is free.
  * training = 3 x forward (backward = gradients w.r.t. inputs + w.r.t. weights, 2 x forward); remat
    recomputation is not counted (model FLOPs, as for MFU).
With these conventions the 70B at 4,096 context over 15T tokens gives ~6.7e24 FLOPs, the report's figure.
"""

import math

from flax import nnx

from apertus_jax.models.config import ModelConfig
from apertus_jax.models.transformer import abstract_model

SOFTMAX_FLOPS_PER_SCORE = 5
RMSNORM_FLOPS_PER_ELEMENT = 4
ROPE_FLOPS_PER_ELEMENT = 3
ACTIVATION_FLOPS_PER_ELEMENT = {"xielu": 4, "swiglu": 5}


def param_count(config: ModelConfig, include_embeddings: bool = True) -> int:
    """Number of trainable parameters; `include_embeddings=False` drops `embed` and `lm_head`."""
    total = 0
    for path, var in nnx.to_flat_state(abstract_model(config)[1]):
        if include_embeddings or path[0] not in ("embed", "lm_head"):
            total += math.prod(var.shape)
    return total


def forward_flops_breakdown(config: ModelConfig, seq_len: int | None = None) -> dict[str, int]:
    """Forward FLOPs of one sequence of `seq_len` tokens (default `config.max_seq_len`), per operation."""
    t = config.max_seq_len if seq_len is None else seq_len
    d, n, k, h, f, v = (
        config.d_model,
        config.n_heads,
        config.n_kv_heads,
        config.head_dim,
        config.mlp_hidden,
        config.vocab_size,
    )
    mlp_matrices = 3 if config.mlp_type == "swiglu" else 2
    per_layer = {
        "attn_qkv": 2 * t * d * (n + 2 * k) * h,
        "attn_qk_norm": RMSNORM_FLOPS_PER_ELEMENT * t * (n + k) * h if config.qk_norm else 0,
        "attn_rope": ROPE_FLOPS_PER_ELEMENT * t * (n + k) * h,
        "attn_scores": 2 * t * t * n * h,
        "attn_softmax": SOFTMAX_FLOPS_PER_SCORE * n * t * t,
        "attn_values": 2 * t * t * n * h,
        "attn_out": 2 * t * n * h * d,
        "mlp": 2 * t * d * f * mlp_matrices,
        "mlp_activation": ACTIVATION_FLOPS_PER_ELEMENT[config.mlp_type] * t * f,
        "norms": 2 * RMSNORM_FLOPS_PER_ELEMENT * t * d,
        "residual": 2 * t * d,
    }
    flops = {name: config.n_layers * value for name, value in per_layer.items()}
    flops["final_norm"] = RMSNORM_FLOPS_PER_ELEMENT * t * d
    flops["logits"] = 2 * t * d * v
    return flops


def forward_flops(config: ModelConfig, seq_len: int | None = None) -> int:
    """Total forward FLOPs of one sequence (sum of `forward_flops_breakdown`)."""
    return sum(forward_flops_breakdown(config, seq_len).values())


def train_flops_per_token(config: ModelConfig, seq_len: int | None = None) -> float:
    """Training FLOPs (forward + backward = 3 x forward) per token at context `seq_len`; for MFU."""
    t = config.max_seq_len if seq_len is None else seq_len
    return 3 * forward_flops(config, t) / t
