"""Data preparation on datatrove: dedup, compliance and quality filtering, and tokenization.

Modules: `dedup` (exact and MinHash stages on datatrove's dedup steps), `tokenize` (ArrayRecord shards from
many datatrove tasks), `shard_parts` (the one shard writer of `tokenize` and the pipeline, `SHARD_TOKENS`),
`robots` (retroactive robots.txt on protego), `robots_fetch` (robots.txt snapshots fetched from the web),
`pii` (email/IP/IBAN anonymization), `embedders` and `classifier` (embedding + JAX MLP head), `toxicity`
(per-language top-5% removal), `quality` (Boldt tiers, Dense-Core), `decontam` (8-gram screen + difflib),
`steps` (datatrove steps), `pipeline` (stages and executors from a config), `stats` (report), `run`
(end-to-end runner), `extra` (the check of the `prep` extra), `demo` (demo inputs from vendored text),
`boldt_demo` (Boldt's scored subsets of the demo corpus, rule-based scores, for the ablations),
`demo_corpus_build` (rebuilds the vendored demo corpus of `apertus_jax/data/assets/` from the registries).
CLIs: `python -m experiments.prepare_data --config=configs/prep/demo.py`,
`python -m experiments.tokenize_data`, `experiments.fetch_robots`, `experiments.build_demo_corpus`.
"""
