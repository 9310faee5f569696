"""Data: pre-tokenized shards, raw sources, packing, masks, Goldfish, mixtures and the training pipeline.

One concept per module, import from the module:
- `pipeline.build_train_pipeline(data_config, tokenizer, seq_len, batch_size, process_index,
  process_count, seed)`: the trainer's checkpointable batch iterator;
- `config`: the data config schema (components, stages, goldfish) and its validation;
- `masks.document_masks`: EoD-based segment ids, positions and loss mask (docs/recipe.md 2);
- `goldfish.goldfish_drop_mask`: the Goldfish rule, Apertus-compatible or well-mixed (docs/recipe.md 3);
- `packing.PackedRows`: documents -> rows of T + 1 tokens; `mixture`: components, subsets, stage mixes;
- `shards`: ArrayRecord shard sets + manifest (written by `experiments.tokenize_data`);
- `sources`: raw JSONL / Parquet / text documents; `demo_corpus`: the vendored real-text demo corpus.
"""
