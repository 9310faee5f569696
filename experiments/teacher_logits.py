"""Write a teacher's top-k next-token log-probabilities over a student run's batches
(`apertus_jax.jobs.distill.write_teacher_logits`; docs/usage.md "Pretraining distillation").

    python -m experiments.teacher_logits --teacher=/tmp/apertus_demo --config=configs/runs/tiny_demo.py \\
        --config.model.n_layers=1 --config.train.steps=100 --steps=100 --k=32 --out=/tmp/teacher_logits

`--config` is the STUDENT's run config (its data, seed and batch plan fix the rows the teacher sees);
`--teacher` a training workdir with the same tokenizer. A bad flag or path ends with one line on stderr and
exit status 2. Rerun after an interruption (Ctrl-C), it keeps the step files already written by the same
teacher and `--k` for the same rows and writes only the others.
"""

from absl import flags

from apertus_jax.jobs.distill import write_teacher_logits
from experiments import cli

_CONFIG = cli.define_run_config("configs/runs/tiny_demo.py")
_TEACHER = flags.DEFINE_string("teacher", None, "The teacher's training workdir.")
_OUT = flags.DEFINE_string("out", None, "Directory of the stored logits (one file per step and meta.json).")
_STEPS = flags.DEFINE_integer("steps", None, "Steps of the student run to cover (>= its train.steps).")
_K = flags.DEFINE_integer("k", 32, "Teacher log-probabilities kept per position (the most likely k ids).")


def main(argv) -> None:
    del argv
    cli.required(teacher=_TEACHER.value, out=_OUT.value, steps=_STEPS.value)
    config = cli.parsed_config(_CONFIG)
    meta = write_teacher_logits(_TEACHER.value, config, _OUT.value, steps=_STEPS.value, k=_K.value)
    print(f"wrote {meta['steps']} steps of top-{meta['k']} teacher logits to {_OUT.value}")


if __name__ == "__main__":
    cli.execute(main, compilation_cache=True)
