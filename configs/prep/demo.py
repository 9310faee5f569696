"""Data preparation demo: the full pipeline (dedup included) on the vendored multilingual sample with the local executor.

`python -m experiments.prepare_data --config=configs/prep/demo.py` builds the demo inputs (demo corpus:
UDHR in ~440 languages and German prose; noisy German web text from de-corpus; a robots.txt snapshot for
their fictional hosts; proxy-labeled JSONL for the heads, see apertus_jax/prep/demo/inputs.py), trains the four
heads, runs the stages and prints the statistics table. Override any field on the command line, e.g.
`--config.executor.workers=2` or `--config.work_dir=/tmp/prep2`.

For real data set `demo=False`, `input_dir` to JSONL files with `id`, `text`, `lang`, `source`, `url`
fields, `robots.snapshot` to a snapshot from experiments/fetch_robots.py and each head's `labels` to your
labeled JSONL (or `path` to a trained head); see configs/prep/slurm.py for a cluster run.
"""

import ml_collections

from apertus_jax.data.shards import SHARD_TOKENS
from apertus_jax.prep.robots.compliance import AI_AGENTS

WORK_DIR = "{work_dir}"  # replaced by config.work_dir when the CLI loads the config


def get_config():
    config = ml_collections.ConfigDict()
    config.demo = True  # write the demo inputs, snapshot and labels into work_dir first
    config.demo_input_files = 8
    config.work_dir = "/tmp/apertus_prep/demo"
    config.input_dir = f"{WORK_DIR}/input"
    config.output_dir = f"{WORK_DIR}/shards"
    config.tokenizer = "tekken"
    config.lang_key, config.source_key, config.url_key = "lang", "source", "url"

    config.executor = dict(
        kind="local",
        tasks=4,
        workers=1,
        skip_completed=True,
        slurm=dict(
            partition="normal",
            time="04:00:00",
            cpus_per_task=1,
            mem_per_cpu_gb=4,
            venv_path=None,
            sbatch_args={},
        ),
        ray=dict(cpus_per_task=1, mem_per_cpu_gb=4),
    )

    # Exact (text hash) and MinHash near-duplicate removal before every other step (datatrove's dedup).
    # MinHash: b = num_buckets bands of r = hashes_per_bucket minhashes over word n-grams; pairs with shingle
    # Jaccard above (1/b)^(1/r) (0.72 here) are removed with high probability.
    config.dedup = dict(
        exact=dict(enabled=True),
        minhash=dict(enabled=True, n_grams=5, num_buckets=14, hashes_per_bucket=8, seed=1),
    )
    config.robots = dict(enabled=True, snapshot=f"{WORK_DIR}/robots.jsonl", mode="domain", agents=AI_AGENTS)
    config.pii = dict(enabled=True, skip_sources=("code", "math"))
    # Post-training data only (Apertus 4.1.2); point `benchmarks` at a JSONL of benchmark prompts.
    config.decontam = dict(
        enabled=False, benchmarks="", prompt_key="prompt", id_key="id", n=8, min_block=5, threshold=0.5
    )

    heads = f"{WORK_DIR}/heads"
    labels = f"{WORK_DIR}/labels"
    config.heads = {
        name: dict(path=f"{heads}/{name}.safetensors", labels=f"{labels}/{name}.jsonl", languages=("de",))
        for name in ("toxicity", "coherence", "information_value", "educational_quality")
    }
    config.toxicity = dict(enabled=True, top_fraction=0.05, skip_sources=("code", "math"))
    # Binary heads score P(label 1); educational_quality is a regression head on a 0-3 scale.
    config.quality = dict(
        enabled=True,
        keep=None,
        thresholds=dict(coherence=0.5, information_value=0.5, educational_quality=2.0),
    )
    config.shards = dict(
        source="apertus_jax demo corpus + de-corpus (prepared)",
        licence="see apertus_jax/data/assets/DATA_CARD.md; de-corpus MIT",
        score_key="score_educational_quality",
        shard_tokens=SHARD_TOKENS,  # tokens per shard, the same as experiments/tokenize_data.py
    )
    return config
