"""The main job: pretrain an Apertus-style model.

    python -m experiments.pretrain --config=configs/tiny_demo.py --workdir=/tmp/apertus_demo
    python -m experiments.pretrain --config=configs/tiny_demo.py --config.train.steps=100 --workdir=DIR

Re-running the same command on the same workdir resumes from its newest readable checkpoint. A bad config,
tokenizer, data path or workdir ends with one line on stderr and exit status 2 (nothing written); SIGTERM
or SIGINT (Ctrl-C) saves a checkpoint at the current step and exits 0; a second Ctrl-C, or one before training
starts, stops at once with one line and exit status 130 (the last complete checkpoint stays valid).
"""

import os
import sys

from absl import flags, logging
from ml_collections import config_flags

from apertus_jax.train import distributed
from experiments import cli

_CONFIG = config_flags.DEFINE_config_file("config", "configs/tiny_demo.py", "Run config (a Python file).")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/tiny_demo", "Run directory: checkpoints, metrics, logs.")


def _enable_compilation_cache() -> None:
    """Persistent XLA compilation cache (default ~/.cache/apertus_jax/xla; JAX_COMPILATION_CACHE_DIR
    overrides): a restarted or resumed run skips recompiling its train step."""
    import jax

    from apertus_jax.train.inputs import cache_dir

    if not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", os.path.join(cache_dir(), "xla"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def main(argv) -> None:
    del argv  # the flags are parsed; the preset override reads sys.argv to see which fields were given
    _enable_compilation_cache()
    from apertus_jax.train.checkpoint import WorkdirLockedError
    from apertus_jax.train.config import apply_preset_override
    from apertus_jax.train.loop import train
    from apertus_jax.train.workdir_access import check_workdir_usable

    try:
        apply_preset_override(_CONFIG.value, sys.argv)
        check_workdir_usable(_WORKDIR.value)  # before devices and the mesh start: a bad workdir fails fast
        distributed.initialize_from_env()  # TPU pods, SLURM, explicit JAX_* variables; no-op for one process
        outcome = train(_CONFIG.value, _WORKDIR.value)
    except (ValueError, OSError, WorkdirLockedError) as error:
        cli.usage_error(error)
    except KeyboardInterrupt:
        print(
            f"interrupted: stopped without saving; rerun the same command to resume {_WORKDIR.value} "
            "from its last checkpoint",
            file=sys.stderr,
        )
        sys.exit(130)
    logging.info("run %s: %s", outcome, _WORKDIR.value)


if __name__ == "__main__":
    cli.run_absl(main)
