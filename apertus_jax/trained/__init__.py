"""A trained run's workdir put to use: loaded, evaluated, exported, served to lm-evaluation-harness.

- `workdir`: the trained model, tokenizer and config of a workdir (`load_workdir`);
- `evaluate`: its newest checkpoint on multiple choice, perplexity or memorization (`experiments.evaluate`);
- `eval_data`: what perplexity and memorization score: the user's held-out data or the run's own held-out sets;
- `export`: a HF checkpoint with tokenizer, chat template and data statement (`experiments.export_hf`);
- `lm_eval`: the lm-evaluation-harness model `apertus_jax` (`experiments.lm_eval`; docs/lm_eval.md).
"""
