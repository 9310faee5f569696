r"""Trains a SentencePiece BPE tokenizer with the pipeline's special ids (unk 0, BoD 1, EoD 2, pad 3).

Each --input is a file glob (`.txt`: one document per file; `.jsonl`: one document per line in its
"text" field), `demo` (the demo corpus train split) or `demo:SOURCE` ("udhr", "german_prose"), optionally
prefixed with `NAME=` to name a subset. With --per_subset, one model per --input is written to
`--out/NAME.model` (Boldt: a 32k tokenizer per data subset); otherwise all inputs train one model at
the path --out, with `.model` appended when it does not end in it (load it as `sentencepiece:PATH.model`).

  python -m experiments.train_tokenizer --input=demo --vocab_size=32000 --out=/tmp/bpe32k.model
  python -m experiments.train_tokenizer --per_subset --out=/tmp/subsets \
      --input=prose=demo:german_prose --input=udhr=demo:udhr --vocab_size=8000
"""

import glob
import json
import os

from absl import flags

from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.tokenizers.train import BPEConfig, train_per_subset, train_sentencepiece
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


def read_documents(spec: str) -> list[str]:
    """Documents of one --input (without its NAME= prefix).

    Raises:
      FileNotFoundError: the glob matches no file.
      ValueError: a file type other than .txt/.jsonl, or a .jsonl line without "text".
    """
    if spec == "demo" or spec.startswith("demo:"):
        sources = [spec.partition(":")[2]] if ":" in spec else None
        return [doc["text"] for doc in load_demo_documents("train", sources)]
    paths = sorted(glob.glob(spec, recursive=True))
    if not paths:
        raise FileNotFoundError(f"--input {spec!r} matches no file")
    documents = []
    for path in paths:
        # Non-UTF-8 bytes become U+FFFD instead of stopping the run.
        with open(path, encoding="utf-8", errors="replace") as f:
            if path.endswith(".txt"):
                documents.append(f.read())
            elif path.endswith(".jsonl"):
                for number, line in enumerate(f, 1):
                    if line.strip():
                        record = json.loads(line)
                        if "text" not in record:
                            raise ValueError(f'{path}:{number} has no "text" field')
                        documents.append(record["text"])
            else:
                raise ValueError(f"--input file {path} is neither .txt nor .jsonl")
    return documents


def _subset_name(spec: str) -> str:
    name = os.path.basename(spec.split("*")[0].rstrip("/")) or "subset"
    return name.replace(":", "_").removesuffix(".txt").removesuffix(".jsonl")


def main(argv):
    del argv
    config = BPEConfig(
        vocab_size=VOCAB_SIZE.value, model_type=MODEL_TYPE.value, character_coverage=CHARACTER_COVERAGE.value
    )
    try:
        subsets = {}
        for entry in INPUTS.value:
            name, separator, spec = entry.partition("=")
            if not separator:
                name, spec = _subset_name(entry), entry
            subsets.setdefault(name, []).extend(read_documents(spec))
        if not PER_SUBSET.value:
            subsets = {"all": [doc for docs in subsets.values() for doc in docs]}
            path = OUT.value if OUT.value.endswith(".model") else OUT.value + ".model"
            train_sentencepiece(subsets["all"], path, config)
            paths = {"all": path}
        else:
            paths = train_per_subset(subsets, OUT.value, config)
    except (ValueError, FileNotFoundError) as error:
        cli.usage_error(error)
    for name, path in paths.items():
        print(f"{name}: {len(subsets[name])} documents -> sentencepiece:{path}")


if __name__ == "__main__":
    cli.run_absl(main)
