"""Re-measure the figures the docs quote and rewrite them (`tools.measure.measurements`).

    python -m tools.measure               # every registered measurement
    python -m tools.measure --only demo   # the README's "Try it" figures
    python -m tools.measure --rewrite_only  # after editing a table template: rewrite from the results files
    python -m tools.measure --only demo --processor_only  # add this processor kind's record
    python -m tools.measure --only gpu_profile --from_dir DIR  # record the --out DIR of a run made on a GPU

Each measurement runs its documented command(s) and writes `docs/results/NAME.json` (command, date, commit,
machine, values); then every generated block of README.md, BENCHMARKS.md and docs/ is rewritten from the
results files (docs/results.md). With --processor_only a results file keeps its figures and gains the
deterministic values of this processor kind, which the fresh-run checks on this kind then compare with exactly
(docs/results.md, "Across processor kinds"). With --from_dir nothing runs: the measurements of --only that are run
on another machine (a GPU) are recorded from the --out directory of their command made there. An unknown name ends with one line on stderr and exit status 2; a
failed command ends the same way after its own output, the results files written before it kept.
"""

from absl import flags

from experiments import cli
from tools.measure.measurements import MEASUREMENTS, REPO, measure_all, selected

_ONLY = flags.DEFINE_list("only", None, f"Measure only these (default: all): {', '.join(MEASUREMENTS)}.")
_REWRITE_ONLY = flags.DEFINE_bool(
    "rewrite_only", False, "Measure nothing: rewrite the generated blocks from the results files as they are."
)
_PROCESSOR_ONLY = flags.DEFINE_bool(
    "processor_only",
    False,
    "Keep the figures: add this processor kind's deterministic values to each results file (measured on the "
    "code of the record, from another processor kind).",
)


_FROM_DIR = flags.DEFINE_string(
    "from_dir",
    None,
    "Run nothing: record the measurements of --only from DIR, the --out directory of their command run on "
    "another machine (a GPU).",
)


def main(argv) -> None:
    del argv
    if _REWRITE_ONLY.value and _ONLY.value:
        raise ValueError("--rewrite_only measures nothing: drop --only, or --rewrite_only to measure")
    if _REWRITE_ONLY.value and _PROCESSOR_ONLY.value:
        raise ValueError(
            "--rewrite_only measures nothing: drop --processor_only, or --rewrite_only to measure"
        )
    if _REWRITE_ONLY.value and _FROM_DIR.value is not None:
        raise ValueError("--rewrite_only measures nothing: drop --from_dir, or --rewrite_only to record it")
    if _FROM_DIR.value is not None and not _ONLY.value:
        raise ValueError("--from_dir records the measurements of --only: name them (e.g. --only gpu_profile)")
    names = [] if _REWRITE_ONLY.value else selected(_ONLY.value)
    measure_all(REPO, names, _PROCESSOR_ONLY.value, _FROM_DIR.value)


if __name__ == "__main__":
    cli.execute(main)
