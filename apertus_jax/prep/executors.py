"""Builds the preparation pipeline from one config as a chain of datatrove executors.

Stages (each a datatrove executor; `depends` chains them, so Slurm runs them as dependent job arrays):
  0. dedup      (`config.dedup`): exact and MinHash signature, bucket and cluster stages on datatrove's
                 dedup steps (see `apertus_jax.prep.filters.dedup`)
  1. filter     (tasks = T): read JSONL -> count tokens -> remove exact and near duplicates -> robots.txt ->
                 PII -> decontamination -> classifier scores -> `<work_dir>/scored/<rank>.jsonl.gz`
  2. thresholds (1 task):   per-language toxicity thresholds over all scored documents (a global percentile
                 needs every score) -> `<work_dir>/toxicity_thresholds.json`
  3. select     (tasks = T): read scored -> toxicity filter -> quality tiers -> ArrayRecord shards per task
  4. merge      (1 task):   one manifest over all task shards at `output_dir` (training reads this)

Each stage logs to `<work_dir>/logs/<stage>/` (datatrove's stats/, completions/, logs/). Output depends
only on the config and the number of tasks, not on the number of workers or the executor.

Config (an `ml_collections.ConfigDict` or nested dict; see configs/prep/demo.py for every field):
  input_dir, work_dir, output_dir, tokenizer, lang_key, source_key, url_key,
  executor {kind: local|slurm|ray, tasks, workers, skip_completed, slurm {...}, ray {...}},
  dedup {exact {enabled}, minhash {enabled, n_grams, num_buckets, hashes_per_bucket, seed}},
  robots {enabled, snapshot, mode, agents}, pii {enabled, skip_sources},
  decontam {enabled, benchmarks, prompt_key, id_key, n, min_block, threshold},
  heads {<name>: {path, labels, languages}}, toxicity {enabled, top_fraction, skip_sources},
  quality {enabled, thresholds {tier: min score}, keep},
  shards {source, licence, score_key, shard_tokens (shard size in tokens, `shards.SHARD_TOKENS`)}.
"""

import os

from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter

from apertus_jax.prep import steps
from apertus_jax.prep.filters import dedup, quality

STAGES = (*dedup.STAGES, "filter", "thresholds", "select", "merge")
EXECUTORS = ("local", "slurm", "ray")


def heads_used(config) -> dict:
    """Heads the enabled steps need: toxicity (if enabled) and the three tiers (if quality is enabled)."""
    names = (["toxicity"] if config.toxicity.enabled else []) + (
        list(quality.TIERS) if config.quality.enabled else []
    )
    heads = {}
    for name in names:
        if name not in config.heads:
            raise ValueError(f"config.heads has no {name!r} head, needed by the enabled steps")
        head = config.heads[name]
        languages = head.get("languages")
        heads[name] = {"path": head["path"], "languages": list(languages) if languages is not None else None}
    return heads


def _dedup_enabled(config) -> bool:
    return "dedup" in config and (config.dedup.exact.enabled or config.dedup.minhash.enabled)


def build_stages(config) -> dict[str, list]:
    """The datatrove step lists of the stages in run order (see the module docstring).

    Raises:
      ValueError: unknown robots mode / quality subset, or a needed head missing from config.heads.
      FileNotFoundError: a head file or the benchmark file does not exist.
    """
    work, keys = config.work_dir, dict(lang_key=config.lang_key)
    scored_dir = os.path.join(work, "scored")
    thresholds_path = os.path.join(work, "toxicity_thresholds.json")

    def reader():
        return JsonlReader(config.input_dir, glob_pattern="*.jsonl*", id_key="id")

    stages = dedup.build_dedup_stages(config, reader) if _dedup_enabled(config) else {}
    filter_stage = [reader(), steps.CountTokens(config.tokenizer, **keys)]
    if _dedup_enabled(config):
        filter_stage += dedup.filter_steps(config, config.lang_key)
    if config.robots.enabled:
        filter_stage.append(
            steps.RobotsFilter(
                config.robots.snapshot,
                config.robots.mode,
                tuple(config.robots.agents),
                url_key=config.url_key,
                **keys,
            )
        )
    if config.pii.enabled:
        filter_stage.append(steps.AnonymizePII(tuple(config.pii.skip_sources), config.source_key, **keys))
    if config.decontam.enabled:
        d = config.decontam
        filter_stage.append(
            steps.Decontaminate(
                d.benchmarks,
                os.path.join(work, "contamination"),
                d.prompt_key,
                d.id_key,
                d.n,
                d.min_block,
                d.threshold,
                **keys,
            )
        )
    heads = heads_used(config)
    if heads:
        filter_stage.append(
            steps.ScoreDocuments(heads, tuple(config.toxicity.skip_sources), config.source_key, **keys)
        )
    filter_stage.append(JsonlWriter(scored_dir, output_filename="${rank}.jsonl.gz"))

    select_stage = [JsonlReader(scored_dir, glob_pattern="*.jsonl*")]
    if config.toxicity.enabled:
        select_stage.append(steps.ToxicityFilter(thresholds_path, **keys))
    if config.quality.enabled:
        select_stage.append(steps.QualityTiers(dict(config.quality.thresholds), config.quality.keep, **keys))
    s = config.shards
    select_stage.append(
        steps.WriteShards(
            config.output_dir, config.tokenizer, s.source, s.licence, s.score_key, s.shard_tokens, **keys
        )
    )
    return {
        **stages,
        "filter": filter_stage,
        "thresholds": [
            steps.ComputeToxicityThresholds(scored_dir, thresholds_path, config.toxicity.top_fraction, **keys)
        ]
        if config.toxicity.enabled
        else [],
        "select": select_stage,
        "merge": [steps.MergeShardManifests(config.output_dir, [config.input_dir])],
    }


def build_executors(config) -> dict:
    """One datatrove executor per non-empty stage, chained with `depends`; run the last one to run all.

    Local: `LocalPipelineExecutor(tasks, workers)`. Slurm: `SlurmPipelineExecutor` with config.executor.slurm
    (partition, time, cpus_per_task, mem_per_cpu_gb, venv_path, sbatch_args, ...). Ray: `RayPipelineExecutor`
    with config.executor.ray (cpus_per_task, mem_per_cpu_gb); needs `pip install ray`.
    Raises:
      ValueError: unknown executor kind.
    """
    ex = config.executor
    executors, previous = {}, None
    for stage, pipeline in build_stages(config).items():
        if not pipeline:
            continue
        if stage in dedup.STAGES:
            tasks = dedup.stage_tasks(config, stage)
        else:
            tasks = ex.tasks if stage in ("filter", "select") else 1
        executors[stage] = previous = make_executor(
            ex, pipeline, tasks, os.path.join(config.work_dir, "logs", stage), f"prep-{stage}", previous
        )
    return executors


def check_executor(ex) -> None:
    """Checks an executor section (`kind`, `workers`; a preparation config's also `tasks`).

    Raises:
      ValueError: one line naming the field: an unknown kind, workers neither -1 (one per task, datatrove's
        meaning) nor at least 1, or tasks below 1.
    """
    if ex["kind"] not in EXECUTORS:
        raise ValueError(f"executor kind {ex['kind']!r} unknown; use one of {EXECUTORS}")
    if ex["workers"] != -1 and ex["workers"] < 1:
        raise ValueError(f"executor.workers must be -1 (one per task) or at least 1, got {ex['workers']!r}")
    if "tasks" in ex and ex["tasks"] < 1:
        raise ValueError(f"executor.tasks must be at least 1, got {ex['tasks']!r}")


def make_executor(ex, pipeline: list, tasks: int, logging_dir: str, job_name: str, depends=None):
    """One datatrove executor of kind `ex.kind` ("local", "slurm", "ray") for `pipeline`.

    Args:
      ex: the executor section (`kind`, `workers`, `skip_completed`, `slurm {...}`, `ray {...}`).
      tasks: datatrove tasks (the number of input shares); local workers are capped at it.
      depends: the executor that must finish first (Slurm: a job dependency).
    Raises:
      ValueError: as `check_executor`.
    """
    check_executor(ex)
    common = dict(
        pipeline=pipeline,
        tasks=tasks,
        logging_dir=logging_dir,
        skip_completed=ex["skip_completed"],
        depends=depends,
    )
    if ex["kind"] == "local":
        from datatrove.executor import LocalPipelineExecutor

        return LocalPipelineExecutor(workers=min(ex["workers"], tasks), **common)
    if ex["kind"] == "slurm":
        from datatrove.executor import SlurmPipelineExecutor

        return SlurmPipelineExecutor(job_name=job_name, **dict(ex["slurm"]), **common)
    from datatrove.executor.ray import RayPipelineExecutor

    return RayPipelineExecutor(workers=ex["workers"], **dict(ex["ray"]), **common)


def resolve_work_dir(config):
    """Replaces `{work_dir}` in every string field by `config.work_dir` (in place; returns the config)."""

    def visit(section):
        for key in list(section.keys()):
            value = section[key]
            if hasattr(value, "keys"):
                visit(value)
            elif isinstance(value, str) and "{work_dir}" in value:
                section[key] = value.replace("{work_dir}", config.work_dir)

    visit(config)
    return config
