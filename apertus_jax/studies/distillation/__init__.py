"""The distillation study (README.md): a student distilled from a teacher's stored logits against the same
student trained from scratch, over seeds.

- `study`: both arms from the same start for every seed, their held-out losses and plot (`run_study`).
"""
