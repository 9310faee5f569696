"""Pretrain a student on stored teacher logits (`apertus_jax.jobs.distill.distill`; docs/usage.md
"Pretraining distillation"): `alpha * tau^2 * KL(teacher top-k || student) + (1 - alpha) * CE`.

    python -m experiments.distill --config=configs/runs/tiny_demo.py --config.model.n_layers=1 \\
        --config.train.steps=100 --logits=/tmp/teacher_logits --workdir=/tmp/apertus_student

The logits come from `experiments.teacher_logits` with the same student config. Re-running the same command
resumes; a bad config, flag or store ends with one line on stderr and exit status 2.
"""

from absl import flags

from apertus_jax.jobs.distill import distill
from apertus_jax.train.checkpoint import check_workdir_usable
from experiments import cli

_CONFIG = cli.define_run_config("configs/runs/tiny_demo.py")
_WORKDIR = flags.DEFINE_string("workdir", None, "The student's run directory.")
_LOGITS = flags.DEFINE_string("logits", None, "Directory written by experiments.teacher_logits.")
_ALPHA = flags.DEFINE_float(
    "alpha", 0.9, "Weight of the KL term (Apertus Mini: 0.9); 1 - alpha weighs the CE."
)
_TEMPERATURE = flags.DEFINE_float("temperature", 1.0, "Softmax temperature of teacher and student in the KL.")


def main(argv) -> None:
    del argv
    cli.required(workdir=_WORKDIR.value, logits=_LOGITS.value)
    config = cli.parsed_config(_CONFIG)
    check_workdir_usable(_WORKDIR.value)
    status = distill(
        config, _WORKDIR.value, _LOGITS.value, alpha=_ALPHA.value, temperature=_TEMPERATURE.value
    )
    cli.print_run_status(status, _WORKDIR.value)


if __name__ == "__main__":
    cli.execute(main, compilation_cache=True)
