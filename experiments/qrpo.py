"""Preference alignment with length-normalized QRPO or the DPO baseline (`apertus_jax.jobs.posttrain.qrpo`).

    python -m experiments.qrpo --config=configs/posttrain/qrpo_tiny.py \\
        --config.checkpoint.init_from=workdir/sft_tiny --workdir=workdir/qrpo_tiny
    python -m experiments.qrpo --config=configs/posttrain/qrpo_tiny.py --config.posttrain.objective=dpo \\
        --config.posttrain.beta=0.1 --config.optim.peak_lr=3e-4 \\
        --config.checkpoint.init_from=workdir/sft_tiny --workdir=workdir/dpo_tiny

With `posttrain.reference = "cached"` (default) the frozen reference (`checkpoint.init_from`, or
`posttrain.reference_workdir`) first scores every candidate completion once into WORKDIR/reference_logprobs.json
(kept on resume), then training reads the numbers and holds only the policy. Same behaviour as
`experiments.pretrain` otherwise: re-running resumes, SIGTERM saves and exits 0, bad input ends with one line
on stderr and exit status 2.
"""

from absl import flags

from apertus_jax.jobs.posttrain import qrpo
from apertus_jax.train import distributed
from apertus_jax.train.checkpoint import check_workdir_usable
from experiments import cli

_CONFIG = cli.define_run_config("configs/posttrain/qrpo_tiny.py")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/qrpo_tiny", "Run directory: checkpoints, metrics, logs.")


def main(argv) -> None:
    del argv
    config = cli.parsed_config(_CONFIG)
    check_workdir_usable(_WORKDIR.value)
    distributed.initialize_from_env()
    status = qrpo(config, _WORKDIR.value)
    cli.print_run_status(status, _WORKDIR.value)


if __name__ == "__main__":
    cli.execute(main, compilation_cache=True)
