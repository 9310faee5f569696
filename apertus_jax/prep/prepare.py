"""Runs a preparation config end to end: demo inputs (optional), head training, the executors, the report.

Used by `experiments/prepare_data.py` and by the tests (so both run the same code).
"""

import glob
import os
import shutil

from absl import logging

from apertus_jax import files
from apertus_jax.prep import local_executor, stats
from apertus_jax.prep.demo import inputs as demo
from apertus_jax.prep.executors import build_executors, check_executor, heads_used, resolve_work_dir
from apertus_jax.prep.filters.classifier import Classifier, load_labeled_jsonl


def write_demo_inputs(config) -> None:
    """Demo documents split round-robin into `config.demo_input_files` JSONL files, the demo robots.txt
    snapshot at `config.robots.snapshot`, and each head's labeled JSONL at its `labels` path."""
    docs = demo.demo_documents()
    n = config.demo_input_files
    for i in range(n):
        demo.write_jsonl(docs[i::n], os.path.join(config.input_dir, f"part-{i:05d}.jsonl"))
    demo.write_jsonl(
        [{"domain": host, "robots_txt": text} for host, text in sorted(demo.DEMO_ROBOTS.items())],
        config.robots.snapshot,
    )
    for name, rows in demo.demo_labels().items():
        if name in config.heads:
            demo.write_jsonl(rows, config.heads[name].labels)


def train_missing_heads(config) -> list[str]:
    """Trains (from its `labels` JSONL) and saves every head the enabled steps need whose `path` is missing.

    Returns the names of the trained heads.
    Raises:
      FileNotFoundError: a needed head has neither a file at `path` nor a `labels` file.
    """
    trained = []
    for name in heads_used(config):
        head = config.heads[name]
        if os.path.isfile(head.path):
            continue
        if not head.get("labels") or not os.path.isfile(head.labels):
            raise FileNotFoundError(
                f"head {name!r}: no trained head at {head.path} and no labeled JSONL at "
                f"{head.get('labels')!r}; set config.heads.{name}.labels"
            )
        texts, labels = load_labeled_jsonl(head.labels)
        os.makedirs(os.path.dirname(head.path) or ".", exist_ok=True)
        Classifier.train(texts, labels).save(head.path)
        trained.append(name)
    return trained


def completed_tasks(executors: dict) -> tuple[int, int]:
    """(tasks already completed in the executors' logging dirs, all tasks), over every stage."""
    done = total = 0
    for executor in executors.values():
        total += executor.world_size
        done += sum(map(executor.is_rank_completed, range(executor.world_size)))
    return done, total


def report_reuse(config, executors: dict) -> None:
    """Logs (warning) that a run reuses tasks an earlier run completed in the same work_dir: their output
    and statistics are the earlier run's, whatever the settings (e.g. executor.workers) are now."""
    if not config.executor.skip_completed:
        return
    done, total = completed_tasks(executors)
    if not done:
        return
    what = "nothing to run" if done == total else f"running the other {total - done}"
    logging.warning(
        "reusing %d of %d tasks completed by an earlier run in %s (%s); their output and statistics, "
        "throughput included, are that run's whatever the settings now; for a fresh run pass a new "
        "--config.work_dir or delete %s",
        done,
        total,
        config.work_dir,
        what,
        config.work_dir,
    )


def run_prepare(config, report_only: bool = False) -> dict:
    """Runs the pipeline of `config` (after `resolve_work_dir`) and writes `<work_dir>/prep_stats.json`
    (copied next to the shard manifest in `output_dir`, where training's provenance record reads it).

    With a Slurm executor this submits the jobs and returns the report of what has finished so far.
    Returns the report dict (see `stats.build_report`).
    Raises:
      FileNotFoundError: no input files, or a needed head can be neither loaded nor trained.
      ValueError: an invalid config value (robots mode, executor kind or counts, quality subset, ...).
    """
    check_executor(config.executor)  # before the demo inputs and the work_dir are written
    resolve_work_dir(config)
    if not report_only:
        if config.demo:
            write_demo_inputs(config)
        if not glob.glob(os.path.join(config.input_dir, "**", "*.jsonl*"), recursive=True):
            raise FileNotFoundError(
                f"no *.jsonl[.gz|.zst] files under input_dir {config.input_dir!r}; point "
                "config.input_dir at JSONL documents with id, text, lang, source, url"
            )
        train_missing_heads(config)
        if config.executor.kind == "local":
            local_executor.use_forkserver()
            local_executor.quiet_console()
        executors = build_executors(config)
        report_reuse(config, executors)
        list(executors.values())[-1].run()
    report = stats.build_report(config.work_dir)
    path = os.path.join(config.work_dir, "prep_stats.json")
    files.write_json(path, report, indent=1)
    if os.path.isdir(config.output_dir):
        # Next to the shard manifest, so a training run that reads the shards records what prep removed.
        shutil.copyfile(path, os.path.join(config.output_dir, "prep_stats.json"))
    return report
