"""The drivers of the trainer: each a plain function of a parsed config that assembles a run and trains it.

- `pretrain`: the standard hooks of every run (`assemble`, `run_training`) and the pretraining job;
- `posttrain`: chat SFT, and QRPO or DPO against a frozen reference;
- `long_context`: the context-extension stages, one run per stage;
- `gpt_samples`: pretraining on the exact rows of the Megatron fork's GPTDataset;
- `distill`: the teacher's pass writing its logits, and the student's distillation run.

The command lines over these are in `experiments/`; the studies that drive several runs are in
`apertus_jax.studies` (docs/architecture.md, "Add a job" and "Add a study").
"""
