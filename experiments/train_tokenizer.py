r"""Trains a SentencePiece BPE tokenizer with the pipeline's special ids (unk 0, BoD 1, EoD 2, pad 3).

Each --input is a file glob (`.txt`: one document per file; `.jsonl`: one document per line in its
"text" field), `demo` (the demo corpus train split) or `demo:SOURCE` ("udhr", "german_prose"), optionally
prefixed with `NAME=` to name a subset. With --per_subset, one model per --input is written to
`--out/NAME.model` (Boldt: a 32k tokenizer per data subset); otherwise all inputs train one model at
the path --out, with `.model` appended when it does not end in it (load it as `sentencepiece:PATH.model`).
The training is `apertus_jax.tokenizers.train.train_inputs`.

  python -m experiments.train_tokenizer --input=demo --vocab_size=32000 --out=/tmp/bpe32k.model
  python -m experiments.train_tokenizer --per_subset --out=/tmp/subsets \
      --input=prose=demo:german_prose --input=udhr=demo:udhr --vocab_size=8000
"""

from absl import flags

from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.tokenizers.train import BPEConfig, train_inputs
from experiments import cli

INPUTS = flags.DEFINE_multi_string(
    "input", None, "[NAME=]GLOB | [NAME=]demo[:SOURCE] (repeatable)", required=True
)
OUT = flags.DEFINE_string("out", None, "model path (.model), or folder with --per_subset", required=True)
VOCAB_SIZE = flags.DEFINE_integer("vocab_size", 32_000, "vocabulary size incl. specials and bytes")
MODEL_TYPE = flags.DEFINE_enum("model_type", "bpe", ["bpe", "unigram"], "SentencePiece model type")
CHARACTER_COVERAGE = flags.DEFINE_float(
    "character_coverage", 0.9995, "characters covered by pieces; the rest use byte fallback"
)
PER_SUBSET = flags.DEFINE_bool("per_subset", False, "one model per --input (Boldt)")


def main(argv):
    del argv
    config = BPEConfig(
        vocab_size=VOCAB_SIZE.value, model_type=MODEL_TYPE.value, character_coverage=CHARACTER_COVERAGE.value
    )
    models = train_inputs(
        INPUTS.value,
        OUT.value,
        config,
        demo_documents=load_demo_documents,
        per_subset=PER_SUBSET.value,
    )
    for name, (path, documents) in models.items():
        print(f"{name}: {documents} documents -> sentencepiece:{path}")


if __name__ == "__main__":
    cli.execute(main)
