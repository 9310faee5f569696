"""Preference alignment with length-normalized QRPO (or the DPO baseline) on the pretraining trainer.

    python -m experiments.qrpo --config=configs/qrpo_tiny.py --workdir=workdir/qrpo_tiny
    python -m experiments.qrpo --config=configs/qrpo_tiny.py --config.posttrain.objective=dpo \
        --config.posttrain.beta=0.1 --config.optim.peak_lr=3e-4 --workdir=workdir/dpo_tiny

With `posttrain.reference = "cached"` (default) the frozen reference (`checkpoint.init_from`, or
`posttrain.reference_workdir`) first scores every candidate completion once into WORKDIR/reference_logprobs.json
(kept on resume), then training reads the numbers and holds only the policy. Same behaviour as
`experiments.pretrain` otherwise: re-running resumes, SIGTERM saves and exits 0, bad input ends with one line
on stderr and exit status 2.
"""

import sys

from absl import app, logging

DEFAULTS = {"config": "configs/qrpo_tiny.py", "workdir": "workdir/qrpo_tiny"}


def with_defaults(argv: list[str]) -> list[str]:
    """`argv` with this job's --config and --workdir defaults where they are not given."""
    given = {a[2:].split("=")[0] for a in argv[1:] if a.startswith("--")}
    return argv[:1] + [f"--{k}={v}" for k, v in DEFAULTS.items() if k not in given] + argv[1:]


def main(argv) -> None:
    del argv
    from experiments import pretrain

    pretrain._quiet_library_logs()
    pretrain._enable_compilation_cache()
    from apertus_jax.posttrain.reference_cache import prepare_reference_cache
    from apertus_jax.train import distributed
    from apertus_jax.train.checkpoint import WorkdirLockedError
    from apertus_jax.train.config import apply_preset_override
    from apertus_jax.train.loop import train

    config, workdir = pretrain._CONFIG.value, pretrain._WORKDIR.value
    try:
        apply_preset_override(config, sys.argv)
        distributed.initialize_from_env()
        if config.posttrain.objective == "lm":
            raise ValueError(
                "experiments.qrpo trains posttrain.objective 'qrpo' or 'dpo'; use experiments.sft for 'lm'"
            )
        if config.posttrain.reference == "cached":
            prepare_reference_cache(config, workdir)
        outcome = train(config, workdir)
    except (ValueError, OSError, WorkdirLockedError) as error:
        print("error: " + " ".join(str(error).split()), file=sys.stderr)
        sys.exit(2)
    logging.info("run %s: %s", outcome, workdir)


if __name__ == "__main__":
    # Before experiments.pretrain defines --config: config_flags loads the file named in sys.argv then.
    sys.argv = with_defaults(sys.argv)
    from experiments import pretrain

    app.run(main, flags_parser=pretrain.parse_flags)
