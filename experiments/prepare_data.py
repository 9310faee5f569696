"""Data preparation CLI: robots.txt, PII, decontamination, toxicity and Boldt tiers on datatrove.

  python -m experiments.prepare_data --config=configs/prep/demo.py
  python -m experiments.prepare_data --config=configs/prep/demo.py --config.executor.workers=2
  python -m experiments.prepare_data --config=configs/prep/slurm.py            # submits Slurm job arrays
  python -m experiments.prepare_data --config=configs/prep/slurm.py --report_only

Prints the statistics table and writes it as JSON to `<work_dir>/prep_stats.json`; the ArrayRecord
shards (read with `apertus_jax.data.shards.ShardSource(output_dir, tokenizer)`) go to `output_dir`.
"""

from absl import app, flags
from ml_collections import config_flags

from apertus_jax.prep.run import run_prepare
from apertus_jax.prep.stats import format_report

_CONFIG = config_flags.DEFINE_config_file("config", None, "Preparation config file (configs/prep/*.py).")
_REPORT_ONLY = flags.DEFINE_bool("report_only", False, "Only print the report of an earlier run.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}")
    config = _CONFIG.value
    try:
        report = run_prepare(config, report_only=_REPORT_ONLY.value)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"prepare_data: {e}") from None
    print(format_report(report))
    print(f"\nreport: {config.work_dir}/prep_stats.json  shards: {config.output_dir}")


if __name__ == "__main__":
    flags.mark_flag_as_required("config")
    app.run(main)
