"""Compare training runs: loss and in-loop eval metrics vs tokens (PNG) and a markdown table
(`apertus_jax.studies.ablations.compare`, where the definitions are).

    python -m experiments.compare_runs /tmp/ablation --baseline=baseline --out=/tmp/ablation/comparison
    python -m experiments.compare_runs /tmp/run_a /tmp/run_b

Each DIR is a run workdir (holding `metrics.jsonl`) or a folder searched for them; a workdir called `seed<N>`
belongs to the variant named by its parent folder (the layout of `experiments.ablate`). Writes OUT.png and
OUT.md and prints the table; without --out, `comparison.png/.md` in the folder that holds the runs, never in a
run's workdir (`/tmp/run_a /tmp/run_b`: /tmp/comparison; an ablation folder DIR: DIR/comparison). An unfinished run (fewer steps than its config.json's
`train.steps`) is left out and named in a warning and in OUT.md. No DIR, a DIR without runs, none finished or an
unknown baseline ends with one line on stderr and exit status 2.
"""

from absl import flags

from apertus_jax.studies.ablations.compare import compare
from experiments import cli

_BASELINE = flags.DEFINE_string("baseline", None, "Variant the others are compared to (default: the first).")
_OUT = flags.DEFINE_string(
    "out", None, "Output path without extension (default: comparison in the folder holding the runs)."
)


def main(argv) -> None:
    dirs = argv[1:]
    if not dirs:
        raise ValueError("pass one or more run workdirs or folders holding them: compare_runs DIR [DIR ...]")
    if _OUT.value:
        cli.check_output_file(_OUT.value + ".md", "--out")
    png, table = compare(dirs, _BASELINE.value, _OUT.value)
    with open(table) as f:
        print(f.read())
    print(f"wrote {png} and {table}")


if __name__ == "__main__":
    cli.execute(main)
