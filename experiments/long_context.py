"""Context extension: run the stages of a long-context config in order (docs/long_context.md).

    python -m experiments.long_context --config=configs/tiny_long_context.py \\
        --init_from=/tmp/lc/pretrain --workdir=/tmp/lc/stages
    python -m experiments.long_context --config=configs/apertus_8b_long_context.py \\
        --init_from=PRETRAIN_WORKDIR --workdir=LONG_CONTEXT_ROOT

The config file lists its stages in `STAGES` and returns stage NAME's run config from `get_config(NAME)`.
Stage i trains in WORKDIR/<name> from the parameters of stage i-1 (stage 1: of `--init_from`); finished
stages are skipped and an interrupted one resumes, so re-running the same command continues where it stopped.
WORKDIR/metrics.jsonl joins the stages' records. Every stage config is validated before anything is written:
a bad config or path ends with one line on stderr and exit status 2; SIGTERM stops after a checkpoint (exit 0).
"""

import os
import sys

from absl import flags, logging

from experiments import cli

_CONFIG = flags.DEFINE_string("config", None, "A long-context config file (STAGES and get_config(stage)).")
_INIT_FROM = flags.DEFINE_string("init_from", None, "The pretraining workdir the first stage starts from.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Root of the stage workdirs.")


def main(argv) -> None:
    del argv
    import jax

    from apertus_jax.train.inputs import cache_dir

    # As experiments.pretrain: a persistent XLA cache, so a restarted driver skips recompiling.
    if not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", os.path.join(cache_dir(), "xla"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)

    from apertus_jax.train import config as config_lib
    from apertus_jax.train import distributed
    from apertus_jax.train.checkpoint import WorkdirLockedError
    from apertus_jax.train.context_stages import load_stages, run_stages

    try:
        for name, value in (
            ("config", _CONFIG.value),
            ("init_from", _INIT_FROM.value),
            ("workdir", _WORKDIR.value),
        ):
            if not value:
                raise ValueError(f"--{name} is required")
        distributed.initialize_from_env()
        stages = load_stages(_CONFIG.value)
        for name, config in stages:
            try:
                config_lib.sections(config, jax.device_count(), jax.process_count())
            except ValueError as error:
                raise ValueError(f"stage {name}: {error}") from None
        outcome = run_stages(stages, _WORKDIR.value, _INIT_FROM.value)
    except (ValueError, OSError, WorkdirLockedError) as error:
        print("error: " + " ".join(str(error).split()), file=sys.stderr)
        sys.exit(2)
    logging.info("long context %s: %s", outcome, _WORKDIR.value)


if __name__ == "__main__":
    cli.run_absl(main)
