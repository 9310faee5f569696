"""The optimizer ablation (docs/optimizers.md): AdamW, AdEMAMix, Muon and Lion on the Apertus architecture, each at
three learning rates, at two token budgets, 3 seeds.

    python -m experiments.ablate --config=configs/ablations/optimizers.py --workdir=/tmp/optim_ablation

Base: the CPU size of configs/ablations/apertus_components.py with the Apertus changes that are not the optimizer
(ungated xIELU MLP, QK-norm, WSD with a 1-sqrt cooldown over the last 20%, warmup 10%); no Goldfish, so every
optimizer sees all tokens. Variants `<optimizer>_lr<LR>` train 150 steps of 16 x 64 tokens (154k tokens),
`<optimizer>_lr<LR>_3x` three times as long with the same schedule shape. The learning rates bracket the
baseline's 3e-3 by factors of 3; Muon matches AdamW's update RMS (`optim.muon_rms = 0.2`), so it shares AdamW's
rates; Lion's sign update is about five times larger than AdamW's, so its rates are 3 times smaller and its
weight decay 3 times larger (the same decay per step, lr x weight_decay).
"""

from configs.ablations.apertus_components import QK_NORM, TOKENS, WSD, XIELU, llama_baseline

ADAMW_RATES = ("1e-3", "3e-3", "1e-2")
LION_RATES = ("3e-4", "1e-3", "3e-3")
OPTIMIZERS = {
    "adamw": {"optim.name": "adamw"},
    "ademamix": {
        "optim.name": "ademamix",
        "optim.alpha_warmup_steps": lambda c: c.train.steps,
        "optim.b3_warmup_steps": lambda c: c.train.steps,
    },
    "muon": {"optim.name": "muon"},
    "lion": {"optim.name": "lion", "optim.b2": 0.99, "optim.weight_decay": 0.3},
}


def budget(factor: int) -> dict:
    """`factor` times the base's steps and tokens, warmup 10% of them (WSD's cooldown follows the total)."""
    return {
        "train.steps": lambda c: c.train.steps * factor,
        "optim.total_tokens": TOKENS * factor,
        "optim.warmup_tokens": TOKENS * factor // 10,
    }


def get_ablation():
    variants = {}
    for factor, suffix in ((1, ""), (3, "_3x")):
        for name, optimizer in OPTIMIZERS.items():
            for rate in LION_RATES if name == "lion" else ADAMW_RATES:
                variants[f"{name}_lr{rate}{suffix}"] = [
                    XIELU,
                    QK_NORM,
                    budget(factor),
                    WSD,
                    optimizer,
                    {"optim.peak_lr": float(rate)},
                ]
    return dict(base=llama_baseline(), variants=variants, seeds=(0, 1, 2), baseline="adamw_lr3e-3")
