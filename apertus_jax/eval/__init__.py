"""Evaluation: log-likelihood scoring, multiple choice, perplexity and memorization metrics.

The recipe behind them: docs/recipe.md sections 3, 8, 9.

- `scoring`: per-token log p(continuation | context), packed and batched;
- `multiple_choice`: accuracy unnormalized, per token, character and byte, and the chance level;
- `perplexity`: perplexity and bits per byte with the training packer and EoD masks;
- `memorization`: ROUGE-L, LCCS, exact-match length and TTR of generated suffixes;
- `exposure`: canary exposure;
- `tasks`: the exams-qa multiple-choice sets from the `evals` wheel on PyPI;
- `lm_eval_tasks`: local lm-evaluation-harness task files;
- `in_loop`: `InLoopEvaluation`, the trainer hook that scores held-out sets and multiple choice during training;
- `config`: the `eval` section.
"""
