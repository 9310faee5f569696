"""Small-scale Goldfish memorization study: standard loss vs Goldfish on Shakespeare's sonnets
(`apertus_jax.studies.goldfish.study`, where the setup is described; docs/recipe.md section 3).

    python -m experiments.goldfish_study --out=workdir/goldfish_study

A tiny Apertus is trained twice on the same sonnets for many epochs, once with the standard loss and once
with the Goldfish loss, then prompted with each document's start and scored on the greedy continuation.
Writes `goldfish_study.json` and `goldfish_study.png` into `--out` and prints a table; progress with ETA in
the log (stderr). Default settings: 500 steps per run (both runs about 100 s on 2 CPU cores). A bad document count or
prefix/suffix length ends with one line on stderr and exit status 2.
"""

from absl import flags, logging

from apertus_jax.studies.goldfish.study import GoldfishStudy, run_study, summary_table
from apertus_jax.train.checkpoint import check_workdir_usable
from experiments import cli

_OUT = flags.DEFINE_string("out", "workdir/goldfish_study", "Output directory (JSON + PNG).")
_EPOCHS = flags.DEFINE_integer("epochs", 50, "Passes over the training documents (Hans et al.: 50).")
_NUM_DOCUMENTS = flags.DEFINE_integer("num_documents", 100, "Training documents (sonnets 1..N, N <= 130).")
_PREFIX_LEN = flags.DEFINE_integer("prefix_len", 32, "Prompt tokens (including <s>).")
_SUFFIX_LEN = flags.DEFINE_integer("suffix_len", 64, "Generated and scored tokens.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 20, "Documents per step.")
_K = flags.DEFINE_integer("k", 4, "Goldfish drop rate 1/k.")
_H = flags.DEFINE_integer("h", 13, "Goldfish hash context width (tokens).")
_HASH = flags.DEFINE_enum(
    "hash", "apertus", ["apertus", "mixed"], "Goldfish hash (apertus_jax.data.goldfish.drop_masks)."
)
_LR = flags.DEFINE_float("lr", 3e-3, "Peak learning rate (AdamW, WSD schedule).")
_D_MODEL = flags.DEFINE_integer("d_model", 128, "Width of the tiny model.")
_LAYERS = flags.DEFINE_integer("layers", 2, "Layers of the tiny model.")
_VOCAB = flags.DEFINE_integer("vocab", 1024, "Vocabulary of the demo SentencePiece BPE.")
_EVAL_EVERY = flags.DEFINE_integer("eval_every", 10, "Epochs between memorization evaluations (curve).")
_SEED = flags.DEFINE_integer("seed", 0, "Initialization and document order.")


def main(argv) -> None:
    del argv
    check_workdir_usable(_OUT.value, "--out")  # before the training runs: the results are written at the end
    study = GoldfishStudy(
        epochs=_EPOCHS.value,
        num_documents=_NUM_DOCUMENTS.value,
        prefix_len=_PREFIX_LEN.value,
        suffix_len=_SUFFIX_LEN.value,
        batch_size=_BATCH_SIZE.value,
        k=_K.value,
        h=_H.value,
        hash=_HASH.value,
        lr=_LR.value,
        d_model=_D_MODEL.value,
        layers=_LAYERS.value,
        vocab=_VOCAB.value,
        eval_every=_EVAL_EVERY.value,
        seed=_SEED.value,
    )
    results = run_study(study, _OUT.value, log=logging.info)
    print(summary_table(results))
    print(f"wrote {_OUT.value}/goldfish_study.json and goldfish_study.png in {results['seconds']}s")


if __name__ == "__main__":
    cli.execute(main, compilation_cache=True)
