"""The training data pipeline: documents of typed component kinds, mixed, packed and masked into batches.

The components' documents are mixed by stage and packed into rows with EoD masks and Goldfish, as batches that
resume exactly from a checkpoint.

- `pipeline`: `TrainIterator`, the checkpointable batch iterator, and `pipeline_source`, a run's default batch
  source;
- `config`: the `data` section and the typed pipeline (`parse_pipeline`: components, stages, goldfish);
- `kinds`: the component-kind registry and the fields every kind shares;
- `components`: the built-in document kinds and how each loads;
- `documents`: a loaded source (`Component`) and how raw text becomes its documents;
- `sources`: raw JSONL, Parquet and text documents;
- `shards`: ArrayRecord shard sets with their manifest (written by `experiments.tokenize_data`);
- `process_shards`: this process's rows of a run, its block of the shards;
- `mixture`: components, subsets and stage mixes as Grain datasets;
- `packing`: documents into rows of T + 1 tokens;
- `masks`: EoD segment ids, positions and loss mask of a packed row (docs/recipe.md 2);
- `run_tokenizer`: the run's tokenizer and the demo BPE; data tokenized with another tokenizer refused;
- `provenance`: where a component's documents come from;
- `demo_corpus`: the vendored real-text demo corpus;
- `strategy_report`: what a data strategy feeds the model (Boldt);
- `goldfish`: the Goldfish loss masks and their canonical hash;
- `megatron`: Megatron `.bin/.idx` datasets and the GPTDataset sample stream;
- `memorization`: the injected kinds of the memorization studies (probes, canaries) and their texts;
- `seqio`: seqio Tasks as components and ours as seqio Tasks (the `seqio` extra);
- `assets`: the vendored demo corpus and the Goldfish table (data, not code).
"""
