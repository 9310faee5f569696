"""Apertus-70B context extension to 262,144 tokens, as Apertus v1.5 raised the context of the released 70B from
65,536 (docs/recipe.md section 13; docs/long_context.md): stages of 128k and 256k tokens after the 64k model,
RoPE theta doubled with each doubling of the length from the 70B's 8M (16M, 32M; v1.5's settings are not public),
tensor parallelism 4 as in pretraining, context parallelism 16 and 32 on 256 devices.

    python -m experiments.long_context --config=configs/runs/apertus_70b_262k.py \\
        --init_from=hf:/data/apertus/Apertus-70B-2509 --workdir=LONG_CONTEXT_ROOT
"""

from configs.recipes.long_context import extension_262k_stages
from configs.runs import apertus_70b_long_context as v1_0

BATCH_TOKENS = v1_0.BATCH_TOKENS  # 8,388,608, as in the v1.0 extension
DEVICES = v1_0.DEVICES
STAGES = extension_262k_stages(theta_64k=v1_0.STAGES[-1].rope_theta, contexts=(16, 32))


def get_config(stage: str = "128k"):
    return v1_0.extension_stage(STAGES, stage)
