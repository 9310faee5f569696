"""Context extension: run the stages of a long-context config in order (`apertus_jax.jobs.long_context`).

    python -m experiments.long_context --config=configs/runs/tiny_long_context.py \\
        --init_from=/tmp/lc/pretrain --workdir=/tmp/lc/stages
    python -m experiments.long_context --config=configs/runs/apertus_8b_long_context.py \\
        --init_from=PRETRAIN_WORKDIR --workdir=LONG_CONTEXT_ROOT

The config file lists its stages in `STAGES` and returns stage NAME's run config from `get_config(NAME)`.
Stage i trains in WORKDIR/<name> from the parameters of stage i-1 (stage 1: of `--init_from`); finished
stages are skipped and an interrupted one resumes, so re-running the same command continues where it stopped.
WORKDIR/metrics.jsonl joins the stages' records. Every stage config is validated before anything is written:
a bad config or path ends with one line on stderr and exit status 2; SIGTERM stops after a checkpoint (exit 0).
"""

import jax
from absl import flags

from apertus_jax.jobs.long_context import load_stages, run_stages
from apertus_jax.train import distributed
from apertus_jax.train.checkpoint import check_workdir_usable
from apertus_jax.train.config import check_layout
from experiments import cli

_CONFIG = flags.DEFINE_string(
    "config",
    None,
    "A long-context config file (STAGES and get_config(stage)), from this directory or the repository.",
)
_INIT_FROM = flags.DEFINE_string(
    "init_from", None, "The pretraining workdir (or hf:DIR, a HF checkpoint) the first stage starts from."
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Root of the stage workdirs.")


def main(argv) -> None:
    del argv
    cli.required(config=_CONFIG.value, init_from=_INIT_FROM.value, workdir=_WORKDIR.value)
    check_workdir_usable(_WORKDIR.value)  # before devices start and the stages are validated
    distributed.initialize_from_env()
    stages = load_stages(cli.config_file(_CONFIG.value))
    for name, config in stages:
        try:
            check_layout(config, jax.device_count(), jax.process_count())
        except ValueError as error:
            raise ValueError(f"stage {name}: {error}") from None
    status = run_stages(stages, _WORKDIR.value, _INIT_FROM.value)
    print(f"long context {status}: {_WORKDIR.value}")


if __name__ == "__main__":
    cli.execute(main, compilation_cache=True)
