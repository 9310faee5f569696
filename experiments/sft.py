"""Supervised fine-tuning on chat data with the pretraining trainer (mesh, accumulation, checkpoints, resume).

    python -m experiments.sft --config=configs/sft_tiny.py --workdir=workdir/sft_tiny

The config's data components are of kind "chat" (docs/posttrain.md); `checkpoint.init_from` names the
pretraining workdir whose parameters start the run. Same behaviour as `experiments.pretrain`: re-running
resumes, SIGTERM saves and exits 0, bad input ends with one line on stderr and exit status 2.
"""

from absl import app, flags

from experiments import pretrain

flags.FLAGS.set_default("config", "configs/sft_tiny.py")
flags.FLAGS.set_default("workdir", "workdir/sft_tiny")

if __name__ == "__main__":
    app.run(pretrain.main, flags_parser=pretrain.parse_flags)
