"""Data preparation CLI: robots.txt, PII, decontamination, toxicity and Boldt tiers on datatrove.

  python -m experiments.prepare_data --config=configs/prep/demo.py
  python -m experiments.prepare_data --config=configs/prep/demo.py --config.executor.workers=2
  python -m experiments.prepare_data --config=configs/prep/slurm.py            # submits Slurm job arrays
  python -m experiments.prepare_data --config=configs/prep/slurm.py --report_only

Needs the `prep` extra (`pip install -e ".[prep]"`: datatrove, protego, pyarrow, orjson). Prints the
statistics table and writes it as JSON to `<work_dir>/prep_stats.json` (demo: /tmp/apertus_prep/demo); the
ArrayRecord shards (read with `apertus_jax.data.shards.ShardSource(output_dir, tokenizer)`) go to
`output_dir` (demo: `<work_dir>/shards`). Datatrove's per-task logs are in `<work_dir>/logs/<stage>/`.

A re-run on the same work_dir reuses the tasks an earlier run completed (datatrove's `skip_completed`):
settings that do not change the output, such as `executor.workers`, then change nothing and the printed
report, throughput included, is the earlier run's; the job says so. For a fresh run pass a new
`--config.work_dir` (or delete the old one).
"""

import importlib

from absl import flags
from ml_collections import config_flags

from experiments import cli

PREP_MODULES = ("datatrove", "protego", "pyarrow", "orjson")

_CONFIG = config_flags.DEFINE_config_file("config", None, "Preparation config file (configs/prep/*.py).")
_REPORT_ONLY = flags.DEFINE_bool("report_only", False, "Only print the report of an earlier run.")


def require_prep_extra() -> None:
    """One line and exit 2 when a package of the `prep` extra is missing."""
    for name in PREP_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            cli.usage_error(
                f"prepare_data needs the 'prep' extra ({name} is not installed); "
                'install it with: pip install -e ".[prep]"'
            )


def main(argv):
    if len(argv) > 1:
        cli.usage_error(f"unexpected arguments {argv[1:]}")
    require_prep_extra()
    from apertus_jax.prep.run import run_prepare
    from apertus_jax.prep.stats import format_report

    config = _CONFIG.value
    try:
        report = run_prepare(config, report_only=_REPORT_ONLY.value)
    except (FileNotFoundError, ValueError) as e:
        cli.usage_error(e)
    print(format_report(report))
    print(f"\nreport: {config.work_dir}/prep_stats.json  shards: {config.output_dir}")


if __name__ == "__main__":
    flags.mark_flag_as_required("config")
    cli.run_absl(main)
