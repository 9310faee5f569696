"""Apertus-8B context extension to 262,144 tokens, as Apertus v1.5 raised the context of the released 8B from
65,536 (docs/recipe.md section 13; docs/long_context.md): two more stages of the v1.0 form (section 5), 128k and
256k tokens (131,072 and 262,144), each its own run from the previous one's parameters, the first from the
released 64k model or its continued pretraining. v1.5's RoPE settings are not public: theta doubles with each
doubling of the length (24M, 48M; v1.0 went 1M, 2M, 4M for 8k, 16k, 32k), llama3 scaling kept. A batch of about
8.4M tokens as before; context parallelism 8 and 16 on 64 devices (`experiments.memory_plan`).

    python -m experiments.long_context --config=configs/runs/apertus_8b_262k.py \\
        --init_from=hf:/data/apertus/Apertus-8B-2509 --workdir=LONG_CONTEXT_ROOT
    python -m experiments.memory_plan --config=configs/runs/apertus_8b_262k.py:256k --meshes=1x4x1x16
"""

from configs.recipes.long_context import extension_262k_stages
from configs.runs import apertus_8b_long_context as v1_0

BATCH_TOKENS = v1_0.BATCH_TOKENS  # 8,388,608, as in the v1.0 extension
DEVICES = v1_0.DEVICES
STAGES = extension_262k_stages(theta_64k=v1_0.STAGES[-1].rope_theta, contexts=(8, 16))


def get_config(stage: str = "128k"):
    return v1_0.extension_stage(STAGES, stage)
