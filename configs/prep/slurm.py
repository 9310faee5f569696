"""Data preparation on a Slurm cluster (datatrove SlurmPipelineExecutor), e.g. FineWeb-2 German shards.

Each stage becomes one Slurm job array (`tasks` tasks, at most `workers` running at once); the
stages depend on each other through `depends`, so `python -m experiments.prepare_data
--config=configs/prep/slurm.py` submits all stages from a login node and returns. Logs, stats and
completion markers go to `<work_dir>/logs/<stage>/`; rerunning skips completed tasks. Print the
report afterwards with `python -m experiments.prepare_data --config=configs/prep/slurm.py --report_only`.

For Ray instead: `--config.executor.kind=ray` (needs `pip install ray` and a running cluster:
`ray start --head`), with `executor.ray.cpus_per_task` / `mem_per_cpu_gb`.
"""

from configs.prep import demo


def get_config():
    config = demo.get_config()
    config.demo = False
    config.work_dir = "/scratch/apertus_prep/fineweb2_deu"
    config.input_dir = "/data/fineweb2/deu_Latn/jsonl"  # JSONL with id, text, lang, source, url
    config.output_dir = "/data/apertus/prepared/fineweb2_deu"
    config.robots.snapshot = "/data/robots/2025-01.jsonl"  # from experiments/fetch_robots.py
    for name, head in config.heads.items():
        head.path = f"/data/apertus/heads/{name}.safetensors"
        head.labels = f"/data/apertus/labels/{name}.jsonl"  # e.g. annotator-LLM scores
    config.executor.kind = "slurm"
    config.executor.tasks = 1000
    config.executor.workers = 200
    config.executor.slurm = dict(
        partition="normal",
        time="12:00:00",
        cpus_per_task=2,
        mem_per_cpu_gb=4,
        venv_path="/apps/apertus_jax/.venv/bin/activate",
        sbatch_args={"account": "my-account"},
    )
    return config
