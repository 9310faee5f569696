"""Run an ablation: a base config plus named override sets, each with several seeds, then compare them
(`apertus_jax.studies.ablations.ablate`, where the ablation file's format is).

    python -m experiments.ablate --config=configs/ablations/apertus_components.py --workdir=/tmp/apertus_recipe
    python -m experiments.ablate --config=configs/ablations/apertus_components.py --variants=llama,full --seeds=0
    python -m experiments.ablate --config=... --set=model.preset=apertus-1.5b --set=train.steps=20000

`--set=KEY=VALUE` (repeatable; VALUE a Python literal, else a string) changes the base for every variant
first; `model.preset=NAME` makes the model section preset NAME's and `train.steps=N` without a schedule field
makes the schedule follow N (as `experiments.pretrain` does). Each run
trains in WORKDIR/<variant>/seed<N> (resuming if it has checkpoints); finished runs are skipped by the next
call, which refuses them (one line, exit 2) if they recorded another config than its `--set` gives them. At the
end the comparison of every run in WORKDIR (earlier calls' too) is written to WORKDIR/comparison.png and
WORKDIR/comparison.md; the result and the table are printed. A SIGTERM stops the current run at a checkpoint
and ends the ablation (rerun the command to continue). A bad file, variant name, seed or override ends with one
line on stderr and exit status 2, with nothing written.
"""

import json
import os

from absl import flags

from apertus_jax.studies.ablations.ablate import load_ablation, parse_sets, run_ablation
from experiments import cli

_CONFIG = flags.DEFINE_string(
    "config", None, "Ablation file (configs/ablations/NAME.py, from this directory or the repository)."
)
_VARIANTS = flags.DEFINE_list("variants", None, "Run only these variants (default: all).")
_SEEDS = cli.define_integer_list("seeds", None, "Run only these seeds (default: the ablation's).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Parent folder of the runs (default workdir/ablations/NAME).")
_SET = flags.DEFINE_multi_string("set", [], "KEY=VALUE override of the base config (repeatable).")


def main(argv) -> None:
    del argv
    cli.required(config=_CONFIG.value)
    name = os.path.splitext(os.path.basename(_CONFIG.value))[0]
    workdir = _WORKDIR.value or os.path.join("workdir", "ablations", name)
    seeds = _SEEDS.value or None
    result = run_ablation(
        load_ablation(cli.config_file(_CONFIG.value)),
        workdir,
        variants=_VARIANTS.value,
        seeds=seeds,
        sets=parse_sets(_SET.value),
    )
    print(json.dumps(result, indent=2))
    if result["comparison"]:
        with open(result["comparison"][1]) as f:
            print(f.read())


if __name__ == "__main__":
    cli.execute(main, compilation_cache=True)
