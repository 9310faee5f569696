"""Supervised fine-tuning on chat data with the pretraining trainer (mesh, accumulation, checkpoints, resume).

    python -m experiments.sft --config=configs/sft_tiny.py --workdir=workdir/sft_tiny

The config's data components are of kind "chat" (docs/posttrain.md); `checkpoint.init_from` names the
pretraining workdir whose parameters start the run. Same behaviour as `experiments.pretrain`: re-running
resumes, SIGTERM saves and exits 0, bad input ends with one line on stderr and exit status 2.
"""

import sys

from absl import app

DEFAULTS = {"config": "configs/sft_tiny.py", "workdir": "workdir/sft_tiny"}


def with_defaults(argv: list[str]) -> list[str]:
    """`argv` with this job's --config and --workdir defaults where they are not given."""
    given = {a[2:].split("=")[0] for a in argv[1:] if a.startswith("--")}
    return argv[:1] + [f"--{k}={v}" for k, v in DEFAULTS.items() if k not in given] + argv[1:]


if __name__ == "__main__":
    # Before experiments.pretrain defines --config: config_flags loads the file named in sys.argv then.
    sys.argv = with_defaults(sys.argv)
    from experiments import pretrain

    app.run(pretrain.main, flags_parser=pretrain.parse_flags)
