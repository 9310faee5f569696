"""The distillation study: a distilled student against the same student trained from scratch on the same
tokens, over seeds (`apertus_jax.studies.distillation.study`; docs/usage.md "Pretraining distillation").

    python -m experiments.distill_study --teacher=/tmp/apertus_demo --config=configs/runs/tiny_demo.py \\
        --config.model.n_layers=1 --config.train.steps=100 --out=/tmp/distill_study

Writes OUT/distill_study.json, OUT/distill_study.png and the per-seed logits and workdirs; prints the mean
held-out losses. A bad flag or path ends with one line on stderr and exit status 2.
"""

from absl import flags

from apertus_jax.studies.distillation.study import ARMS, run_study
from apertus_jax.train.checkpoint import check_workdir_usable
from experiments import cli

_CONFIG = cli.define_run_config("configs/runs/tiny_demo.py")
_TEACHER = flags.DEFINE_string("teacher", None, "The teacher's training workdir (the same tokenizer).")
_OUT = flags.DEFINE_string("out", None, "Output directory.")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Student seeds (data order and initialization).")
_K = flags.DEFINE_integer("k", 32, "Teacher log-probabilities kept per position.")
_ALPHA = flags.DEFINE_float("alpha", 0.9, "Weight of the KL term of the distilled arm.")


def main(argv) -> None:
    del argv
    cli.required(teacher=_TEACHER.value, out=_OUT.value)
    check_workdir_usable(_OUT.value, "--out")  # before the training runs: the results are written at the end
    try:
        seeds = tuple(int(s) for s in _SEEDS.value)
    except ValueError:
        raise ValueError(f"--seeds={','.join(_SEEDS.value)} must be integers, e.g. --seeds=0,1,2") from None
    config = cli.parsed_config(_CONFIG)
    results = run_study(_TEACHER.value, config, _OUT.value, seeds=seeds, k=_K.value, alpha=_ALPHA.value)
    for arm in ARMS:
        losses = ", ".join(f"{name} {loss:.3f}" for name, loss in results["mean_held_out_loss"][arm].items())
        print(f"{arm}: held-out loss {losses}")


if __name__ == "__main__":
    cli.execute(main, compilation_cache=True)
