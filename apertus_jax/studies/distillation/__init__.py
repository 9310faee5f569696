"""The distillation study (README.md): a student distilled from a teacher against one trained from scratch.

The teacher's logits are stored first; both arms start from the same parameters and read the same tokens, for
every seed.

- `study`: both arms from the same start for every seed, their held-out losses and plot (`run_study`).
"""
