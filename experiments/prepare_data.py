"""Data preparation CLI: robots.txt, PII, decontamination, toxicity and Boldt tiers on datatrove.

  python -m experiments.prepare_data --config=configs/prep/demo.py
  python -m experiments.prepare_data --config=configs/prep/demo.py --config.executor.workers=2
  python -m experiments.prepare_data --config=configs/prep/slurm.py            # submits Slurm job arrays
  python -m experiments.prepare_data --config=configs/prep/slurm.py --report_only

Needs the `prep` extra (`pip install -e ".[prep]"`: datatrove, protego, pyarrow, orjson). Prints the
statistics table and writes it as JSON to `<work_dir>/prep_stats.json` (demo: /tmp/apertus_prep/demo); the
ArrayRecord shards (read with `apertus_jax.data.shards.ShardSource(output_dir, tokenizer)`) go to
`output_dir` (demo: `<work_dir>/shards`). Datatrove's per-task logs are in `<work_dir>/logs/<stage>/`.
The run is `apertus_jax.prep.prepare.run_prepare`.

A re-run on the same work_dir reuses the tasks an earlier run completed (datatrove's `skip_completed`):
settings that do not change the output, such as `executor.workers`, then change nothing and the printed
report, throughput included, is the earlier run's; the job says so. For a fresh run pass a new
`--config.work_dir` (or delete the old one).
"""

from absl import flags

from apertus_jax import extras
from experiments import cli

cli.require_extras("prep")  # before the modules that import it: one line and exit 2 without it

from apertus_jax.prep.prepare import run_prepare  # noqa: E402
from apertus_jax.prep.stats import format_report  # noqa: E402

_CONFIG = cli.define_config(None, "Preparation config file (configs/prep/*.py).")
_REPORT_ONLY = flags.DEFINE_bool("report_only", False, "Only print the report of an earlier run.")


def main(argv) -> None:
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments {argv[1:]}")
    cli.required(config=_CONFIG.value)
    config = _CONFIG.value
    if config.executor.kind == "ray" and not extras.installed("ray"):  # before the demo inputs are written
        raise ValueError("--config.executor.kind=ray needs ray, not installed here: pip install ray")
    report = run_prepare(config, report_only=_REPORT_ONLY.value)
    print(format_report(report))
    print(f"\nreport: {config.work_dir}/prep_stats.json  shards: {config.output_dir}")


if __name__ == "__main__":
    cli.execute(main)
