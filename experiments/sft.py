"""Supervised fine-tuning on chat data with the pretraining trainer (`apertus_jax.jobs.posttrain.sft`).

    python -m experiments.sft --config=configs/posttrain/sft_tiny.py \\
        --config.checkpoint.init_from=workdir/tiny_demo --workdir=workdir/sft_tiny

The config's `posttrain.data` lists conversation JSONL files (docs/posttrain.md); `checkpoint.init_from` names
the pretraining workdir whose parameters start the run. Same behaviour as `experiments.pretrain`: re-running
resumes, SIGTERM saves and exits 0, bad input ends with one line on stderr and exit status 2.
"""

from absl import flags

from apertus_jax.jobs.posttrain import sft
from apertus_jax.train import distributed
from apertus_jax.train.checkpoint import check_workdir_usable
from experiments import cli

_CONFIG = cli.define_run_config("configs/posttrain/sft_tiny.py")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/sft_tiny", "Run directory: checkpoints, metrics, logs.")


def main(argv) -> None:
    del argv
    config = cli.parsed_config(_CONFIG)
    check_workdir_usable(_WORKDIR.value)
    distributed.initialize_from_env()
    status = sft(config, _WORKDIR.value)
    cli.print_run_status(status, _WORKDIR.value)


if __name__ == "__main__":
    cli.execute(main, compilation_cache=True)
