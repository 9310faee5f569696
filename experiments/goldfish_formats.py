"""Do two versions of one text drop the same words? Goldfish hashes on Gutenberg vs First Folio Shakespeare
(`apertus_jax.studies.goldfish.formats`, where the method and the statistics are described).

    python -m experiments.goldfish_formats --out=workdir/goldfish_formats [--plays=hamlet,macbeth]

Writes `goldfish_formats.json` and `goldfish_formats.md` into `--out` and prints the table; progress per play
in the log (stderr). An unknown play, a k or h that is not an integer or is below 1 ends with one line on stderr and exit status 2,
with nothing written.
"""

from absl import flags, logging

from apertus_jax.studies.goldfish.formats import markdown, run_study
from apertus_jax.tokenizers.load import spec_forms
from apertus_jax.train.checkpoint import check_workdir_usable
from experiments import cli

_OUT = flags.DEFINE_string("out", "workdir/goldfish_formats", "Output directory (JSON + markdown).")
_PLAYS = flags.DEFINE_list("plays", [], "Plays to compare (default: all 28 with both versions).")
_TOKENIZER = flags.DEFINE_string("tokenizer", "tekken", f"The tokenizer: {spec_forms()}.")
_KS = cli.define_integer_list("k", [4, 50], "Drop rates 1/k.")
_HS = cli.define_integer_list("h", [4, 13, 50], "Context widths (tokens; words for canonical).")


def main(argv) -> None:
    del argv
    check_workdir_usable(_OUT.value, "--out")  # before the training runs: the results are written at the end
    report = run_study(
        _OUT.value,
        plays=_PLAYS.value,
        tokenizer=_TOKENIZER.value,
        ks=_KS.value,
        hs=_HS.value,
        log=logging.info,
    )
    print(markdown(report["results"], report["plays"], report["tokenizer"]))
    print(f"wrote {_OUT.value}/goldfish_formats.json and .md in {report['seconds']}s")


if __name__ == "__main__":
    cli.execute(main)
