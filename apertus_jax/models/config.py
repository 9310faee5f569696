"""Model configuration: one frozen dataclass for every Apertus / Llama-style variant (docs/recipe.md section 1)."""

import dataclasses

import jax

from apertus_jax.checks import check_number

MLP_TYPES = ("xielu", "swiglu")
ROPE_SCALINGS = ("none", "llama3")
ATTENTION_IMPLS = ("xla", "jax_nn", "cudnn", "splash")
REMAT_POLICIES = ("none", "full", "dots_saveable", "dots_with_no_batch_dims_saveable")
# float16 is refused rather than half-supported: its range ends at 65504, so xIELU's alpha_p * x^2 branch is
# inf for x >= ~286, and the trainer has no dynamic loss scaling; bfloat16 has float32's range. float64 is for
# reference runs: checking the model against another implementation without float32's rounding.
COMPUTE_DTYPES = ("float32", "bfloat16", "float64")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Architecture and numerics of a decoder-only Transformer.

    The Apertus defaults follow docs/recipe.md section 1: ungated xIELU MLP, QK-norm, untied embeddings,
    RoPE theta 500,000 with Llama-3.1 frequency scaling (factor 8, low 1, high 4, original 8192).
    Ablation switches give the Llama baseline: `mlp_type="swiglu"`, `qk_norm=False`, `tie_embeddings=True`.

    Attributes:
      vocab_size: ids of the embedding and lm_head (at least the tokenizer's).
      d_model: width of the residual stream.
      n_layers: transformer blocks.
      n_heads, n_kv_heads: query heads and key/value heads (GQA; `n_kv_heads` must divide `n_heads`).
      head_dim: width of one attention head (even, for RoPE).
      mlp_hidden: hidden width of the MLP.
      mlp_type: "xielu" (ungated, `down(xIELU(up(x)))`) or "swiglu" (gated, `down(silu(gate(x)) * up(x))`).
      qk_norm: RMSNorm of queries and keys before attention (Apertus; False: the Llama baseline).
      tie_embeddings: the lm_head shares the embedding matrix (False: Apertus).
      rope_*: base theta and the "none" | "llama3" frequency scaling with its four constants.
      rms_norm_eps: the epsilon of every RMSNorm.
      max_seq_len: training context length in tokens (used by FLOPs and presets, not by the forward).
      dtype: compute dtype name, "float32" or "bfloat16" ("float16" is rejected: it overflows in xIELU's
        x^2 branch and the trainer has no loss scaling), or "float64" for reference runs (64-bit JAX: the
        norms, softmax, RoPE rotation and logits then in float64 too; `layers.wide`).
      param_dtype: dtype the parameters are stored in (float32).
      attention_impl: "xla" (einsum, CPU default), "jax_nn" (`jax.nn.dot_product_attention`, XLA backend),
        "cudnn" (same call with implementation="cudnn", GPU only), "splash" (TPU Pallas kernel).
      attention_query_block: with "xla" attention, queries in blocks of this many positions per device
        (one block's `[heads, block, T]` scores at a time, each block recomputed in the backward pass) once
        a device holds more than one block of the sequence; 0 = all queries at once. For long rows
        (docs/long_context.md), where the whole score matrix does not fit.
      scan_layers: stack the layer parameters on a leading "layers" axis and run them with `jax.lax.scan`.
      remat_policy: "none" (keep all activations), "full" (recompute everything in the backward pass),
        "dots_saveable", "dots_with_no_batch_dims_saveable" (`jax.checkpoint_policies` of those names).
      init_std: standard deviation of the normal init of linear and embedding weights.
      fp8: attention and MLP projections with FP8 (e4m3) inputs and e5m2 gradients, per-tensor current
        scaling (`apertus_jax.models.fp8`; opt-in: Apertus found FP8 unstable late in training). The lm_head
        and attention scores keep `dtype`.

    Raises:
      ValueError: in `__post_init__`, one line naming the bad field as its config key (`model.<field>`) and
        the fix.
    """

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    mlp_hidden: int
    mlp_type: str = "xielu"
    qk_norm: bool = True
    tie_embeddings: bool = False
    rope_theta: float = 500_000.0
    rope_scaling: str = "llama3"
    rope_factor: float = 8.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_max_position_embeddings: int = 8192
    rms_norm_eps: float = 1e-5
    max_seq_len: int = 4096
    dtype: str = "float32"
    param_dtype: str = "float32"
    attention_impl: str = "xla"
    attention_query_block: int = 0
    scan_layers: bool = False
    remat_policy: str = "none"
    init_std: float = 0.02
    fp8: bool = False

    def __post_init__(self):
        for name in (
            "vocab_size",
            "d_model",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "head_dim",
            "mlp_hidden",
            "max_seq_len",
            "rope_original_max_position_embeddings",
        ):
            check_number(f"model.{name}", getattr(self, name), low=1, integer=True)
        for name in (
            "rope_theta",
            "rms_norm_eps",
            "init_std",
            "rope_low_freq_factor",
            "rope_high_freq_factor",
        ):
            check_number(f"model.{name}", getattr(self, name), low=0, low_open=True)
        check_number("model.rope_factor", self.rope_factor, low=1)
        check_number("model.attention_query_block", self.attention_query_block, low=0, integer=True)
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"model.n_kv_heads={self.n_kv_heads} must divide n_heads={self.n_heads} (GQA)")
        if self.head_dim % 2:
            raise ValueError(f"model.head_dim={self.head_dim} must be even for half-split RoPE")
        choices = {
            "mlp_type": MLP_TYPES,
            "rope_scaling": ROPE_SCALINGS,
            "attention_impl": ATTENTION_IMPLS,
            "remat_policy": REMAT_POLICIES,
            "dtype": COMPUTE_DTYPES,
            "param_dtype": ("float32",),
        }
        if self.dtype == "float16":
            raise ValueError(
                "model.dtype='float16' is not supported (float16 overflows: xIELU's x^2 branch is inf "
                "for x >= ~286 and there is no loss scaling); use dtype='bfloat16'"
            )
        for name, valid in choices.items():
            if getattr(self, name) not in valid:
                raise ValueError(f"model.{name}={getattr(self, name)!r} is not one of {valid}")
        if self.dtype == "float64" and not jax.config.jax_enable_x64:
            raise ValueError(
                "model.dtype='float64' needs 64-bit JAX: set JAX_ENABLE_X64=1 or build the model inside "
                "`with jax.enable_x64(True):`"
            )
        if self.attention_impl == "cudnn" and self.dtype == "float32":
            raise ValueError(
                "model.attention_impl='cudnn' needs dtype 'bfloat16' (cuDNN flash "
                "attention has no float32 kernel); use 'jax_nn' or 'xla' for float32"
            )
        if self.rope_scaling == "llama3" and not self.rope_low_freq_factor < self.rope_high_freq_factor:
            raise ValueError(
                "llama3 RoPE scaling needs rope_factor >= 1 and 0 < low_freq_factor < high_freq_factor"
            )

    def replace(self, **overrides) -> "ModelConfig":
        """A copy with `overrides` applied (validated again)."""
        return dataclasses.replace(self, **overrides)

    @property
    def q_per_kv(self) -> int:
        """Query heads sharing one key/value head (GQA group size)."""
        return self.n_heads // self.n_kv_heads
