"""Reading tokens from a Megatron .bin/.idx against the project's ArrayRecord shards, same tokens, one run.

    python -m benchmarks.megatron_read [--passes=3] [--seq_len=4096] [--batch_size=8] [--batches=30]

Writes the demo corpus's training documents (real multilingual + German text, tekken, `[BoD] + ids + [EoD]`)
once as an ArrayRecord shard set and once as a Megatron dataset (int32: tekken has 131,072 ids), then times,
single-threaded, per CPU second of this process (= per core), each pair back to back:
- raw reads of every document in a shuffled order, `--passes` times: `ShardSource[i]` against the
  memory-mapped `IndexedDataset[i]`;
- the same through the component kinds ("arrayrecord" and "megatron": ids checked against the vocabulary,
  int32 documents), as the packer reads them;
- the whole pipeline (shuffled reads -> packing -> masks -> Goldfish k 50, h 50 -> batches) on each kind;
  the batches of both are asserted equal (same documents, same order).
The ratio column is Megatron's tokens/s over ArrayRecord's. Then the GPTDataset indices of
`apertus_jax.data.megatron.gpt_samples` at scale: `--index_samples` samples of seq_len 4096 over `--index_documents`
documents of 1 to 4,000 tokens (uniform, seed 0; epochs as Megatron counts them), the document, sample and
shuffle index each timed once.
"""

from __future__ import annotations

import datetime
import os
import platform
import tempfile
import time

import numpy as np
from absl import flags

from apertus_jax.data import shards
from apertus_jax.data.config import BATCH_KEYS, parse_pipeline
from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.data.goldfish import drop_masks as goldfish
from apertus_jax.data.megatron import gpt_samples
from apertus_jax.data.megatron import indexed as megatron
from apertus_jax.data.pipeline import TrainIterator
from apertus_jax.tokenizers import load_tokenizer
from experiments import cli

_PASSES = flags.DEFINE_integer("passes", 3, "shuffled passes over every document for the read rows")
_SEQ_LEN = flags.DEFINE_integer("seq_len", 4096, "tokens per row")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 8, "rows per batch")
_BATCHES = flags.DEFINE_integer("batches", 30, "batches timed per pipeline")
_INDEX_SAMPLES = flags.DEFINE_integer("index_samples", 10_000_000, "samples of the GPT index timing")
_INDEX_DOCUMENTS = flags.DEFINE_integer("index_documents", 2_000_000, "documents of the GPT index timing")


def cpu_timed(function) -> tuple[float, object]:
    """(CPU seconds of this process, result) of `function()`."""
    start = time.process_time()
    result = function()
    return time.process_time() - start, result


def read_all(documents, order: np.ndarray) -> int:
    """Reads `documents[i]` for i in `order`; returns the tokens read (the sum keeps every read live)."""
    return sum(len(documents[int(i)]) for i in order)


def index_timings(
    samples: int, documents: int, seq_len: int = 4096
) -> tuple[int, int, list[tuple[str, float]]]:
    """(epochs, samples built, [(index, wall seconds)]) of the GPTDataset indices at scale (module docstring)."""
    sizes = np.random.default_rng(0).integers(1, 4001, documents).astype(np.int32)
    tokens = int(sizes.sum())
    epochs = gpt_samples.number_of_epochs(tokens, samples, seq_len, True)
    rng = np.random.RandomState(1234)
    start = time.perf_counter()
    document_index = gpt_samples.document_index(np.arange(documents, dtype=np.int32), epochs, rng, False)
    built = time.perf_counter()
    sample_index = gpt_samples.sample_index(sizes, document_index, seq_len, epochs, tokens, True)
    counted = time.perf_counter()
    gpt_samples.shuffle_index(len(sample_index) - 1, len(sample_index) - 1, rng)
    shuffled = time.perf_counter()
    timings = [
        ("document index (RandomState shuffle)", built - start),
        ("sample index (numpy build_sample_idx)", counted - built),
        ("shuffle index (RandomState shuffle)", shuffled - counted),
    ]
    return epochs, len(sample_index) - 1, timings


def main(argv) -> None:
    del argv
    tokenizer = load_tokenizer("tekken")
    goldfish.goldfish_table()  # load (and checksum) the table outside the timings
    texts = [d["text"] for d in load_demo_documents("train")]
    documents = [
        np.array([tokenizer.bod_id, *ids, tokenizer.eod_id], np.int32)
        for ids in tokenizer.encode_batch(texts)
    ]
    with tempfile.TemporaryDirectory() as directory:
        shard_set, prefix = os.path.join(directory, "shards"), os.path.join(directory, "demo")
        # Shards of 2^20 tokens, as benchmarks/data_pipeline.py writes this corpus.
        with shards.ShardWriter(
            shard_set, tokenizer, source="demo", licence="see DATA_CARD.md", shard_tokens=1 << 20
        ) as writer:
            for tokens in documents:
                writer.write(tokens)
        megatron.write_indexed_dataset(prefix, documents, np.int32)
        source = shards.ShardSource(shard_set, tokenizer)
        dataset = megatron.IndexedDataset(prefix)
        order = np.concatenate(
            [np.random.default_rng(p).permutation(len(source)) for p in range(_PASSES.value)]
        )
        specs = {
            "arrayrecord": {"kind": "arrayrecord", "paths": [shard_set]},
            "megatron": {"kind": "megatron", "paths": prefix},
        }
        components = {
            name: parse_pipeline({"components": {"demo": spec}}).components["demo"].load("demo", tokenizer)
            for name, spec in specs.items()
        }

        def pipeline(kind: str):
            config = {"components": {"demo": specs[kind]}, "goldfish": {"k": 50, "h": 50, "hash": "apertus"}}
            iterator = TrainIterator(
                parse_pipeline(config),
                tokenizer,
                seq_len=_SEQ_LEN.value,
                batch_size=_BATCH_SIZE.value,
                process_index=0,
                process_count=1,
                seed=0,
            )
            return [next(iterator) for _ in range(_BATCHES.value)]

        rows, batches = [], {}
        pairs = [
            ("raw reads, shuffled", lambda: read_all(source, order), lambda: read_all(dataset, order)),
            (
                "component documents (ids checked, int32), shuffled",
                lambda: read_all(components["arrayrecord"].documents, order),
                lambda: read_all(components["megatron"].documents, order),
            ),
        ]
        for name, arrayrecord, bin_idx in pairs:
            (ours_cpu, tokens), (theirs_cpu, same) = cpu_timed(arrayrecord), cpu_timed(bin_idx)
            assert tokens == same
            rows.append((name, tokens, tokens / ours_cpu, tokens / theirs_cpu))
        for kind in ("arrayrecord", "megatron"):
            batches[kind] = cpu_timed(lambda kind=kind: pipeline(kind))
        for a, b in zip(batches["arrayrecord"][1], batches["megatron"][1]):
            for key in BATCH_KEYS:
                np.testing.assert_array_equal(a[key], b[key])  # same documents, same order, same batches
        tokens = _BATCHES.value * _BATCH_SIZE.value * _SEQ_LEN.value
        rows.append(
            (
                "pipeline: reads -> packing -> masks -> Goldfish apertus",
                tokens,
                tokens / batches["arrayrecord"][0],
                tokens / batches["megatron"][0],
            )
        )
        manifest = source.manifest

    print(
        f"# Megatron .bin/.idx vs ArrayRecord reads ({datetime.date.today()}, {platform.node()}, "
        f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()})"
    )
    print(
        f"demo corpus: {manifest['documents']:,} documents, {manifest['tokens']:,} tekken tokens in both formats; "
        f"{_PASSES.value} shuffled passes; pipeline seq_len {_SEQ_LEN.value}, batch {_BATCH_SIZE.value}, "
        f"{_BATCHES.value} batches; single thread, tokens/s per core (CPU time)\n"
    )
    print("| read | tokens | ArrayRecord tokens/s | Megatron .bin/.idx tokens/s | Megatron / ArrayRecord |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, count, ours, theirs in rows:
        print(f"| {name} | {count:,} | {ours:,.0f} | {theirs:,.0f} | {theirs / ours:.2f}x |")

    epochs, built, timings = index_timings(_INDEX_SAMPLES.value, _INDEX_DOCUMENTS.value)
    print(
        f"\nGPTDataset indices: {_INDEX_SAMPLES.value:,} samples requested of seq_len 4096 over "
        f"{_INDEX_DOCUMENTS.value:,} documents: {epochs} epochs, {built:,} samples, "
        f"{epochs * _INDEX_DOCUMENTS.value:,} document-index entries\n"
    )
    print("| index | seconds (wall) |")
    print("| --- | ---: |")
    for name, seconds in timings:
        print(f"| {name} | {seconds:.2f} |")


if __name__ == "__main__":
    cli.execute(main)
