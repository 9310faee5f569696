"""seqio interop (the `seqio` extra): seqio Tasks and Mixtures in our pipeline, ours in seqio.

- `import_tasks`: seqio Tasks/Mixtures as pipeline components (kind "seqio");
- `export_tasks`: our components as seqio Tasks and our stages as seqio Mixtures;
- `vocabulary`: our `Tokenizer` as a `seqio.Vocabulary`.
"""
