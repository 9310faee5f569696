"""Apertus-70B pretraining recipe (SPEC.md sections 1, 4-6): 80 layers, d_model 8192, 64/8 heads, xIELU,
peak LR 1e-5, batch 8.4M -> 16.8M tokens at 4.4T, otherwise as configs/apertus_8b.py (5 curriculum stages).
"""

from apertus_jax.train.config import apertus_stages, apply_optim_preset, base_config, model_section


def get_config():
  config = base_config()
  config.model = model_section("apertus-70b", dtype="bfloat16", scan_layers=True, remat_policy="full",
                               attention_impl="cudnn")
  config.data.tokenizer = "tekken"
  config.data.seq_len = 4096
  config.data.pipeline = apertus_stages(stage_bounds=(5e12, 9e12, 12e12, 13.5e12))
  apply_optim_preset(config, "apertus-70b")
  # One 4,096-token row per batch-sharded device per microbatch on 1,024 GPUs (fsdp 256 x tensor 4);
  # set it to your data x fsdp device count x rows per device (`python -m experiments.memory_plan`).
  config.train.microbatch_size = 256
  config.mesh.data, config.mesh.fsdp, config.mesh.tensor = 1, -1, 4
  config.checkpoint.every_steps = 500
  config.lock()
  return config
