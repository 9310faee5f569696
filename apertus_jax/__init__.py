"""apertus_jax: a JAX/Flax reproduction of the Apertus pretraining recipe and the Boldt data study.

The packages are layers, each importing only those below it (docs/architecture.md), from the ground up:
- `checks`, `cache`, `extras`, `files`, `logs`, `named`: range checks, the cache folder, optional extras, atomic
  writes, the log as the commands print it, objects named "module:attribute" and imported on first use;
- `plots`, `pypi`: figures without pyplot, pinned archives from PyPI;
- `tokenizers`: one Tokenizer interface, BPE training, fairness metrics;
- `models`, `optim`: the Apertus transformer in Flax NNX; AdEMAMix, Muon, WSD and batch-size plans;
- `data`: the training data pipeline (component kinds, packing, masks, Goldfish, mixtures, shards);
- `train`: the trainer (its front door `train.run.Run`, the loop, checkpoints);
- `prep`: data preparation on datatrove;
- `eval`: evaluation metrics and the in-loop evaluation hook;
- `records`: what a run records in its workdir (config, provenance, probes, loss curve) and reads back;
- `posttrain`: objectives and batch sources beyond pretraining (SFT, QRPO, DPO, distillation);
- `config`: the run schema and its one parse into typed sections;
- `trained`: a trained workdir loaded, evaluated, exported, served to lm-eval;
- `aot`: the train step compiled ahead of time (memory plans, TPU and GPU targets);
- `jobs`: the drivers of the trainer (pretraining, post-training, long context, distillation);
- `studies`: the research studies, one folder each with a README of its files, above everything else.
"""

__version__ = "0.1.0"
