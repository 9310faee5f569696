"""The main job: pretrain an Apertus-style model (`apertus_jax.jobs.pretrain.pretrain`).

    python -m experiments.pretrain --config=configs/runs/tiny_demo.py --workdir=/tmp/apertus_demo
    python -m experiments.pretrain --config=configs/runs/tiny_demo.py --config.train.steps=100 --workdir=DIR

Re-running the same command on the same workdir resumes from its newest readable checkpoint. A bad config,
tokenizer, data path or workdir ends with one line on stderr and exit status 2 (nothing written); SIGTERM
saves a checkpoint at the current step and exits 0, Ctrl-C the same with exit status 130 (said at once); a
second Ctrl-C, or one before training starts, stops at once with one line and exit status 130 (the last
complete checkpoint stays valid).
"""

from absl import flags

from apertus_jax.jobs.pretrain import pretrain
from apertus_jax.train import distributed
from apertus_jax.train.checkpoint import check_workdir_usable
from experiments import cli

_CONFIG = cli.define_run_config("configs/runs/tiny_demo.py")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/tiny_demo", "Run directory: checkpoints, metrics, logs.")


def main(argv) -> None:
    del argv
    config = cli.parsed_config(_CONFIG)
    check_workdir_usable(_WORKDIR.value)  # before devices and the mesh start: a bad workdir fails fast
    distributed.initialize_from_env()  # TPU pods, SLURM, explicit JAX_* variables; no-op for one process
    status = pretrain(config, _WORKDIR.value)
    cli.print_run_status(status, _WORKDIR.value)


if __name__ == "__main__":
    cli.execute(main, compilation_cache=True)
