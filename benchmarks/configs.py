"""Benchmark configurations that are not model presets: the accelerator runs of `benchmarks.accelerator`.

Each entry names a model preset (`apertus_jax.models.presets`), overrides of it, the per-device batch and
the sequence length. "1b" is the `apertus-1.5b` preset (Apertus architecture, 0.97B non-embedding
parameters, 131k vocabulary); "8b-slice" has the 8B widths (d_model 4096, MLP 21,504, 32/8 heads) with 4 of
its 32 layers, so one chip holds it with the AdEMAMix state while the per-layer matmul shapes, and thus the
MFU of the layers, are those of the full 8B.
"""

ACCELERATOR_CONFIGS = {
    "1b": dict(preset="apertus-1.5b", overrides={}, batch_per_device=4, seq=4096),
    "8b-slice": dict(preset="apertus-8b", overrides={"n_layers": 4}, batch_per_device=2, seq=4096),
}

# --dry_run: the same code path with tiny widths, on any backend (CPU CI), in seconds.
DRY_RUN = dict(
    overrides=dict(
        vocab_size=512, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, mlp_hidden=192
    ),
    batch_per_device=1,
    seq=128,
)
