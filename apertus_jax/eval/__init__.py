"""Evaluation: multiple-choice log-likelihood, perplexity, memorization (docs/recipe.md sections 3, 8, 9).

- `scoring`: `make_token_logprobs_fn(model)`, `continuation_logprobs(fn, [(context_ids, continuation_ids)],
  seq_len=, batch_size=, pad_id=)`: per-token log p(continuation | context), packed and batched.
- `multiple_choice`: `evaluate_multiple_choice(fn, tokenizer, questions, ...)` -> accuracy unnormalized,
  per token, per character and per byte, and the chance level.
- `perplexity`: `perplexity(fn, documents, ...)` with the training packer and EoD masks; bits per byte.
- `memorization`: ROUGE-L, LCCS, TTR, `memorization_scores(model, documents, prefix_len=, suffix_len=, ...)`,
  probe injection plans.
- `tasks`: exams-qa multiple choice (evals wheel), fetched from PyPI.
- `in_loop`: `InLoopEvaluation`, the trainer hook that scores held-out sets and multiple choice during training.

CLIs: `python -m experiments.evaluate --workdir=DIR --task=german_exams_qa|perplexity|memorization` and
`python -m experiments.goldfish_study` (standard loss vs Goldfish k = 4 on 100 sonnets).
"""
