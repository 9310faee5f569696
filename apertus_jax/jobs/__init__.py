"""Jobs: what a researcher runs, each a plain function of a parsed config above the trainer's front door.

- `config`: the run schema (ConfigDict) and its one parse into typed sections (`Config`).
- `run`: the standard hooks of every run and `pretrain(config, workdir)`.
- `megatron`: pretraining on the exact rows of the Megatron fork's GPTDataset for a blend of prefixes.
- `posttrain`: `sft` and `qrpo` (QRPO/DPO with the reference log-probs as a job step).
- `long_context`: the context-extension stages, one run per stage.
- `records`, `probes`, `loss_plot`: the run's config, provenance and probe-manifest records and its loss curve (loop hooks).
- `workdir`: a trained model and tokenizer from a workdir; `export`: a HF checkpoint with its data statement.
- `lm_eval`, `lm_eval_cli`: the lm-evaluation-harness model `apertus_jax` on our checkpoints.
- `evaluate`: a workdir's newest checkpoint on multiple choice, perplexity or memorization.
- `ablations`, `compare`: a base config with named override sets and seeds, and the comparison of runs.
- `memory_plan`: per-device bytes of the loop's train step, AOT-compiled on a mesh (virtual devices).
- `goldfish_formats`: whether the Goldfish hashes drop the same words in two editions of one text.
- `goldfish_study`: standard loss vs Goldfish on repeated sonnets, trained and scored at CPU scale.
- `memorization`: the memorization study: probes and canaries injected at planned counts, standard vs
  Goldfish runs (and a resume check), scored per repetition count.

The command-line glue over these is `experiments/` (docs/architecture.md).
"""
