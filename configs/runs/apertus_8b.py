"""Apertus-8B pretraining recipe (docs/recipe.md sections 1, 4-6): 32 layers, d_model 4096, xIELU, QK-norm,
tekken 131k vocab, 4,096-token context, AdEMAMix (alpha 8, b3 0.9999, warmups 100k steps), WSD with
1-sqrt cooldown over the last 1.5T of 15T tokens, peak LR 1.1e-4, batch 4.2M -> 8.4M tokens at 7T,
clipping 0.1, weight decay 0.1, Goldfish k=50 h=50. Point `data.pipeline` at your tokenized shards.

    python -m experiments.pretrain --config=configs/runs/apertus_8b.py --workdir=gs://... (or a shared FS path)
"""

from configs.recipes.apertus import apertus_recipe


def get_config():
    config = apertus_recipe(
        "apertus-8b", stage_bounds=(7e12, 9e12, 12e12, 13.5e12), tensor=1, every_steps=1000
    )
    config.lock()
    return config
