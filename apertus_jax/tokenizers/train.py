"""BPE tokenizer training with SentencePiece, with special ids that match the pipeline.

Trained models use the tekken id layout (docs/recipe.md section 2): unk 0, BoD `<s>` 1, EoD `</s>` 2,
pad `<pad>` 3, so a pipeline config can switch between tekken and a trained model without renumbering.
Training is lossless on unseen text: byte fallback (256 byte pieces) instead of `<unk>`, no Unicode
normalization and no whitespace folding, so `decode(encode(text)) == text`.

Boldt trains one 32k BPE tokenizer per data subset: `train_per_subset` with `BPEConfig(vocab_size=32_000)`.
`train_inputs` trains from the `--input` specs of `python -m experiments.train_tokenizer` (files or the demo
corpus).
"""

import dataclasses
import glob
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import sentencepiece as spm

from apertus_jax import files
from apertus_jax.tokenizers.sentencepiece_model import SentencePieceTokenizer

SPECIAL_IDS = {"unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": 3}
# Pieces every trained model holds (the special ids and the 256 byte-fallback pieces): a vocabulary needs more.
RESERVED_PIECES = len(SPECIAL_IDS) + 256


@dataclasses.dataclass(frozen=True)
class BPEConfig:
    """SentencePiece training settings.

    Attributes:
      vocab_size: total ids including the 4 special and 256 byte-fallback pieces (Boldt: 32,000).
      model_type: "bpe" (Boldt, Apertus) or "unigram".
      character_coverage: fraction of characters covered by pieces; the rest fall back to bytes.
      max_sentences: lines sampled for training (SentencePiece's `input_sentence_size`).
      max_sentence_bytes: longer lines are split into chunks of at most this many characters.
      split_digits: one piece per digit, as in Llama/Mistral tokenizers.
      num_threads: trainer threads.
      seed: seed of SentencePiece's sentence sampling.
    """

    vocab_size: int = 32_000
    model_type: str = "bpe"
    character_coverage: float = 0.9995
    max_sentences: int = 2_000_000
    max_sentence_bytes: int = 8_192
    split_digits: bool = True
    num_threads: int = 2
    seed: int = 0


def _lines(texts: Iterable[str], max_chars: int) -> Iterator[str]:
    for text in texts:
        for line in text.splitlines():
            for start in range(0, len(line), max_chars):
                chunk = line[start : start + max_chars]
                if chunk.strip():
                    yield chunk


def train_sentencepiece(
    texts: Iterable[str], out_path: str, config: BPEConfig = BPEConfig()
) -> SentencePieceTokenizer:
    """Trains a SentencePiece model on `texts` and writes it to `out_path` (atomically).

    Args:
      texts: documents; each is split into lines (training "sentences").
      out_path: destination `.model` file; its parent folder is created.
      config: training settings.

    Returns:
      The trained model, loaded (BoD 1, EoD 2, pad 3).

    Raises:
      ValueError: no non-empty line in `texts`, or SentencePiece rejects the settings (e.g. a
        vocabulary too large for the corpus); the message is SentencePiece's.
    """
    # A quarter of the byte budget in characters keeps 4-byte scripts under SentencePiece's limit.
    lines = list(_lines(texts, config.max_sentence_bytes // 4))
    if not lines:
        raise ValueError("no non-empty text to train a tokenizer on; check the --input files")
    model = io.BytesIO()
    spm.set_random_generator_seed(config.seed)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=model,
            vocab_size=config.vocab_size,
            model_type=config.model_type,
            character_coverage=config.character_coverage,
            input_sentence_size=config.max_sentences,
            shuffle_input_sentence=True,
            max_sentence_length=config.max_sentence_bytes,
            byte_fallback=True,
            normalization_rule_name="identity",
            remove_extra_whitespaces=False,
            split_digits=config.split_digits,
            num_threads=config.num_threads,
            minloglevel=2,
            **SPECIAL_IDS,
            pad_piece="<pad>",
        )
    except RuntimeError as error:
        raise ValueError(f"SentencePiece training failed: {error}") from error
    files.write_bytes(out_path, model.getvalue())
    return SentencePieceTokenizer(out_path)


def train_per_subset(
    subsets: Mapping[str, Iterable[str]], out_dir: str, config: BPEConfig = BPEConfig()
) -> dict[str, str]:
    """Boldt's one tokenizer per data subset (32k by default): `{out_dir}/{name}.model` for each.

    Returns:
      subset name -> model path.
    """
    paths = {}
    for name, texts in subsets.items():
        paths[name] = os.path.join(out_dir, f"{name}.model")
        train_sentencepiece(texts, paths[name], config)
    return paths


# The demo corpus loader `(split, sources or None for all) -> documents {"text", ...}`:
# `apertus_jax.data.demo_corpus.load_demo_documents` (this layer cannot import the data layer).
DemoDocuments = Callable[[str, list[str] | None], Iterable[Mapping]]


def read_documents(spec: str, demo_documents: DemoDocuments) -> list[str]:
    """Documents of one input spec without its `NAME=` prefix.

    Args:
      spec: a file glob (`.txt`: one document per file; `.jsonl`: one document per line in its "text"
        field; non-UTF-8 bytes become U+FFFD), `demo` (the demo corpus's train split) or `demo:SOURCE` (one
        source of it).
      demo_documents: the demo corpus loader (`DemoDocuments`), called only for a `demo` spec.

    Raises:
      FileNotFoundError: the glob matches no file.
      ValueError: a file type other than .txt/.jsonl, a .jsonl line without "text", an unknown demo source.
    """
    if spec == "demo" or spec.startswith("demo:"):
        sources = [spec.partition(":")[2]] if ":" in spec else None
        return [doc["text"] for doc in demo_documents("train", sources)]
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


def subset_name(spec: str) -> str:
    """The subset name of an input without `NAME=`: its glob's last fixed path part, without .txt/.jsonl
    (`data/web/*.jsonl` -> "web", `demo:udhr` -> "demo_udhr")."""
    name = os.path.basename(spec.split("*")[0].rstrip("/")) or "subset"
    return name.replace(":", "_").removesuffix(".txt").removesuffix(".jsonl")


def train_inputs(
    inputs: Sequence[str],
    out: str,
    config: BPEConfig,
    demo_documents: DemoDocuments,
    per_subset: bool = False,
) -> dict[str, tuple[str, int]]:
    """Trains SentencePiece models on `inputs`; every input is read before any training starts.

    Args:
      inputs: `[NAME=]SPEC` entries (`read_documents`); entries with one NAME form one subset (default name:
        `subset_name(SPEC)`).
      out: with `per_subset`, the folder of one `NAME.model` per subset (`train_per_subset`); otherwise all
        inputs train one model at `out`, with `.model` appended when it does not end in it.
      config: training settings.
      demo_documents: the demo corpus loader for `demo` specs.
      per_subset: one model per subset (Boldt) instead of one over all inputs (subset "all").

    Returns:
      subset name -> (model path, number of documents trained on).

    Raises:
      FileNotFoundError / ValueError: see `read_documents` and `train_sentencepiece`.
    """
    subsets: dict[str, list[str]] = {}
    for entry in inputs:
        name, separator, spec = entry.partition("=")
        if not separator:
            name, spec = subset_name(entry), entry
        subsets.setdefault(name, []).extend(read_documents(spec, demo_documents))
    if per_subset:
        paths = train_per_subset(subsets, out, config)
    else:
        subsets = {"all": [doc for docs in subsets.values() for doc in docs]}
        paths = {"all": out if out.endswith(".model") else out + ".model"}
        train_sentencepiece(subsets["all"], paths["all"], config)
    return {name: (path, len(subsets[name])) for name, path in paths.items()}
