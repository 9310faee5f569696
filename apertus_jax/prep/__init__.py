"""Data preparation on datatrove: filtering, dedup and tokenization into training shards (docs/usage.md).

- `prepare`: a preparation config run end to end (`experiments.prepare_data`);
- `executors`: the stages of a config as a chain of datatrove executors;
- `steps`: the datatrove pipeline steps over the filters;
- `stats`: the statistics report of a preparation run;
- `tokenize`: tokenization into ArrayRecord shard sets on datatrove's executors (`experiments.tokenize_data`);
- `shard_parts`: one task's part of a shard set, the one shard writer;
- `local_executor`, `quiet_worker`: datatrove's local executor in a process that runs JAX;
- `filters`: PII, toxicity, quality tiers, classifiers, decontamination and dedup;
- `robots`: retroactive robots.txt compliance and snapshots;
- `demo`: demo inputs and the demo corpus build;
- `assets`: the vendored German extract of the demo inputs (data, not code).
"""
