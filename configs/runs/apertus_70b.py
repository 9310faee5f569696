"""Apertus-70B pretraining recipe (docs/recipe.md sections 1, 4-6): 80 layers, d_model 8192, 64/8 heads, xIELU,
peak LR 1e-5, batch 8.4M -> 16.8M tokens at 4.4T, otherwise as configs/runs/apertus_8b.py (5 curriculum stages).
"""

from configs.recipes.apertus import apertus_recipe


def get_config():
    config = apertus_recipe(
        "apertus-70b", stage_bounds=(5e12, 9e12, 12e12, 13.5e12), tensor=4, every_steps=500
    )
    config.lock()
    return config
