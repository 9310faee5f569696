"""What the packed-document mask costs on cuDNN: one layer's attention, dense mask against causal only.

    cost = document_mask_cost(config.model, config.data.seq_len, target_devices(parse_target("h100:1x8")))

The "cudnn" kernel (`apertus_jax.models.attention`) passes the document mask to
`jax.nn.dot_product_attention(..., implementation="cudnn")` as a boolean `[B, 1, T, T]` mask, which jax turns
into a dense bias input of cuDNN's `fmhaScaleBiasSoftmax` (docs/accelerators.md says why no packed form is
used). This compiles the attention core of one layer (forward and backward, one row per GPU, the model's head
counts and dtype) for compile-only GPUs twice: with that mask, and causal only (`is_causal=True`: no document
boundaries, the lower bound), and reports both programs' temporaries per device and the mask's own bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from apertus_jax.aot.memory_plan import GB
from apertus_jax.aot.target_plan import kernels
from apertus_jax.models.attention import attention_mask
from apertus_jax.models.config import ModelConfig


def document_mask_cost(model: ModelConfig, seq_len: int, devices: Sequence) -> dict:
    """Temporaries per device (GB = 1e9 bytes) of one layer's cuDNN attention, forward and backward, over one
    `seq_len` row per device: `masked_gb` (the document mask, dense), `causal_gb` (causal only), their
    difference `mask_gb`, the mask input's own bytes `mask_input_gb` ([1, 1, T, T] in the compute dtype), and
    the cuDNN `kernels` of each program."""
    mesh = jax.sharding.Mesh(np.asarray(devices), ("batch",))
    rows, dtype = len(devices), jnp.dtype(model.dtype)
    spec = lambda *shape: jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, P("batch")))  # noqa: E731
    q = spec(rows, seq_len, model.n_heads, model.head_dim)
    kv = spec(rows, seq_len, model.n_kv_heads, model.head_dim)
    segments = jax.ShapeDtypeStruct((rows, seq_len), jnp.int32, sharding=NamedSharding(mesh, P("batch")))

    def loss(masked: bool):
        def attention(q, k, v, segment_ids):
            mask = attention_mask(segment_ids) if masked else None
            out = jax.nn.dot_product_attention(
                q, k, v, mask=mask, is_causal=not masked, implementation="cudnn"
            )
            return out.astype(jnp.float32).sum()

        return jax.jit(jax.grad(attention, argnums=(0, 1, 2)))

    report = {"mask_input_gb": seq_len * seq_len * dtype.itemsize / GB, "kernels": {}}
    for name, masked in (("masked", True), ("causal", False)):
        compiled = loss(masked).lower(q, kv, kv, segments).compile()
        report[f"{name}_gb"] = compiled.memory_analysis().temp_size_in_bytes / GB
        report["kernels"][name] = kernels(compiled.as_text())
    report["mask_gb"] = report["masked_gb"] - report["causal_gb"]
    return report
