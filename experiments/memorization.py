"""The Apertus memorization study (section 5.4.1, Figure 8; App. H.1): standard vs Goldfish loss on probes
and canaries injected at controlled repetition counts (`apertus_jax.studies.memorization.study`, where the method is).

    python -m experiments.memorization --config=configs/studies/memorization_tiny.py --out=workdir/memorization

Trains the standard and the Goldfish run (and, with `resume_check`, the standard run stopped after its first
checkpoint and resumed) in `--out`/<run>, reusing finished workdirs; scores every probe and canary; writes
`memorization.json`, `memorization.md`, `heatmap_<run>_<decoding>.png` and `canary_exposure.png` into
`--out` and prints the tables. `--config.run.train.steps=N` alone makes the run's LR schedule follow N (as in
`experiments.pretrain`; said in the log). Progress with ETA in the log (stderr). A SIGTERM or Ctrl-C stops the current
run at a checkpoint and ends the study without scoring or writing results (rerun the command to continue). A
bad study setting ends with one line on stderr and exit status 2 before anything is trained or written.
"""

import sys

from absl import flags, logging

from apertus_jax.config.schema import fit_schedule_to_steps, overridden_keys
from apertus_jax.studies.memorization.study import markdown, run_study
from apertus_jax.train.checkpoint import check_workdir_usable
from experiments import cli

_CONFIG = cli.define_config("configs/studies/memorization_tiny.py", "Study config (Python).")
_OUT = flags.DEFINE_string("out", "workdir/memorization", "Output directory: the runs' workdirs and results.")


def main(argv) -> None:
    del argv
    check_workdir_usable(_OUT.value, "--out")  # before the training runs: the results are written at the end
    fitted = fit_schedule_to_steps(_CONFIG.value.run, overridden_keys(sys.argv, "run."), flag="--config.run.")
    if fitted:
        logging.info(fitted)
    report = run_study(_CONFIG.value, _OUT.value, log=logging.info)
    if report is None:  # a run was preempted: it said so; nothing scored or written
        return
    print(markdown(report))
    print(f"wrote {_OUT.value}/memorization.json, memorization.md and the PNGs in {report['seconds']:.0f}s")


if __name__ == "__main__":
    cli.execute(main, compilation_cache=True)
