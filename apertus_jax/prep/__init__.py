"""Data preparation on datatrove: dedup, compliance and quality filtering, and tokenization.

Modules: `dedup` (exact and MinHash stages on datatrove's dedup steps), `tokenize` (ArrayRecord shards from
many datatrove tasks), `robots` (retroactive robots.txt on protego), `pii` (email/IP/IBAN anonymization),
`embedders` and `classifier` (embedding + JAX MLP head), `toxicity` (per-language top-5% removal), `quality`
(Boldt tiers, Dense-Core), `decontam` (8-gram screen + difflib), `steps` (datatrove steps), `pipeline`
(stages and executors from a config), `stats` (report), `run` (end-to-end runner), `demo` (demo inputs from
vendored text). CLIs: `python -m experiments.prepare_data --config=configs/prep/demo.py`,
`python -m experiments.tokenize_data`.
"""
