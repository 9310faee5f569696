"""Data pipeline throughput: pre-tokenized shards -> packing -> masks + Goldfish -> batches.

    python -m benchmarks.data_pipeline [--seq_len=4096] [--batch_size=8] [--batches=60] [--json=PATH]

Writes the demo corpus (real multilingual + German text, tekken) as an ArrayRecord shard set, then times in
one run, single-threaded, per CPU second of this process (= per core):
- the pipeline with the vectorized Apertus Goldfish rule (k = 50, h = 50) and with the mixed hash;
- the same pipeline with Goldfish off, plus a straightforward per-window reference of the Apertus rule
  (one `np.prod` per window, like the Apertus loader's loop) applied to its batches;
and reports the effective Goldfish drop rates on that real text (the Apertus rule's rate is below 1/k
because zero products share one table entry; docs/recipe.md section 3). `--json=PATH` also writes them as
JSON: {documents, tokens (of the shard set), rows [{pipeline, tokens, wall_tokens_per_s, cpu_tokens_per_s}],
apertus_drop_rate, mixed_drop_rate, zero_product_windows (fractions)}; a folder of PATH that does not exist
ends with one line on stderr and exit status 2.
"""

from __future__ import annotations

import datetime
import os
import platform
import tempfile
import time

import numpy as np
from absl import flags

from apertus_jax import files
from apertus_jax.data import shards
from apertus_jax.data.config import parse_pipeline
from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.data.goldfish import drop_masks as goldfish
from apertus_jax.data.pipeline import TrainIterator
from apertus_jax.tokenizers import load_tokenizer
from experiments import cli

_SEQ_LEN = flags.DEFINE_integer("seq_len", 4096, "tokens per row")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 8, "rows per batch")
_BATCHES = flags.DEFINE_integer("batches", 60, "batches timed per vectorized pipeline")
_REFERENCE_BATCHES = flags.DEFINE_integer(
    "reference_batches", 3, "batches timed with the per-window reference"
)
_JSON = flags.DEFINE_string("json", "", "Also write the throughput and the drop rates to this JSON file.")


def reference_goldfish(labels: np.ndarray, k: int, h: int) -> np.ndarray:
    """The Apertus rule window by window: wrapping int64 product, key mod 1_000_003, table < 1/k."""
    table = goldfish.goldfish_table()
    dropped = np.zeros(labels.shape, bool)
    for i in range(h - 1, len(labels)):
        key = int(np.prod(labels[i - h + 1 : i + 1], dtype=np.int64)) % goldfish.TABLE_SIZE
        dropped[i] = table[key] < np.float32(1 / k)
    return dropped


def write_demo_shards(directory: str, tokenizer) -> str:
    texts = [d["text"] for d in load_demo_documents("train")]
    out = os.path.join(directory, "demo")
    with shards.ShardWriter(
        out, tokenizer, source="apertus_jax demo corpus", licence="see DATA_CARD.md", shard_tokens=1 << 20
    ) as writer:
        for ids in tokenizer.encode_batch(texts):
            writer.write(np.array([tokenizer.bod_id, *ids, tokenizer.eod_id], np.int32))
    return out


def timed(function, *args) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = function(*args)
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main(argv) -> None:
    del argv
    folder = os.path.dirname(os.path.abspath(_JSON.value))
    if _JSON.value and not os.path.isdir(folder):
        raise ValueError(f"--json={_JSON.value}: the folder {folder} does not exist; create it first")
    tokenizer = load_tokenizer("tekken")
    goldfish.goldfish_table()  # load (and checksum) the table outside the timings

    with tempfile.TemporaryDirectory() as directory:
        shard_set = write_demo_shards(directory, tokenizer)
        manifest = shards.load_manifest(shard_set)

        def pipeline(k: int, hash_name: str = "apertus"):
            config = {
                "components": {"demo": {"kind": "arrayrecord", "paths": [shard_set]}},
                "goldfish": {"k": k, "h": 50, "hash": hash_name},
            }
            return TrainIterator(
                parse_pipeline(config),
                tokenizer,
                seq_len=_SEQ_LEN.value,
                batch_size=_BATCH_SIZE.value,
                process_index=0,
                process_count=1,
                seed=0,
            )

        def run(iterator, count, reference=False):
            batches = []
            for _ in range(count):
                batch = next(iterator)
                if reference:
                    for row, targets in enumerate(batch["targets"]):
                        batch["loss_mask"][row, reference_goldfish(targets, 50, 50)] = 0
                batches.append(batch)
            return batches

        tokens_per_batch = _SEQ_LEN.value * _BATCH_SIZE.value
        rows = []
        results = {}
        for name, k, hash_name, count, reference in [
            (
                "shards -> packing -> masks -> Goldfish apertus (vectorized)",
                50,
                "apertus",
                _BATCHES.value,
                False,
            ),
            ("shards -> packing -> masks -> Goldfish mixed (vectorized)", 50, "mixed", _BATCHES.value, False),
            ("shards -> packing -> masks, no Goldfish", 0, "apertus", _BATCHES.value, False),
            (
                "shards -> packing -> masks -> Goldfish apertus (per-window reference)",
                0,
                "apertus",
                _REFERENCE_BATCHES.value,
                True,
            ),
        ]:
            wall, cpu, batches = timed(run, pipeline(k, hash_name), count, reference)
            results[name] = batches
            tokens = count * tokens_per_batch
            rows.append((name, tokens, tokens / wall, tokens / cpu))

        vectorized = results[rows[0][0]]
        for a, b in zip(results[rows[3][0]], vectorized):
            np.testing.assert_array_equal(a["loss_mask"], b["loss_mask"])  # same rule, same masks

        labels = np.concatenate([b["targets"] for b in vectorized])

        def drop_rate(hash_name):
            return goldfish.goldfish_drop_mask(labels, 50, 50, hash_name)[:, 49:].mean()

        rates = {hash_name: drop_rate(hash_name) for hash_name in goldfish.TOKEN_HASHES}
        zero_products = (goldfish._window_products(labels.astype(np.int64), 50) == 0).mean()

    reference_speed = rows[3][3]
    print(
        f"# Data pipeline throughput ({datetime.date.today()}, {platform.node()}, {os.cpu_count()} CPUs, "
        f"{platform.processor() or platform.machine()})"
    )
    print(
        f"demo corpus as ArrayRecord shards: {manifest['documents']:,} documents, {manifest['tokens']:,} "
        f"tokens; seq_len {_SEQ_LEN.value}, batch {_BATCH_SIZE.value} rows, single thread\n"
    )
    print("| pipeline | tokens | tokens/s (wall) | tokens/s per core (CPU time) | vs reference |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, tokens, wall_speed, cpu_speed in rows:
        print(
            f"| {name} | {tokens:,} | {wall_speed:,.0f} | {cpu_speed:,.0f} | {cpu_speed / reference_speed:,.1f}x |"
        )
    print("\nGoldfish k=50, h=50 on this real text (tekken), fraction of targets dropped (positions >= h-1):")
    print(
        f"- Apertus rule: {rates['apertus']:.4f} (1/k = 0.0200); windows with a zero int64 product: "
        f"{zero_products:.3f}"
    )
    print(f"- mixed hash:   {rates['mixed']:.4f}")
    if _JSON.value:
        report = {
            "documents": manifest["documents"],
            "tokens": manifest["tokens"],
            "rows": [
                {"pipeline": name, "tokens": tokens, "wall_tokens_per_s": wall, "cpu_tokens_per_s": cpu}
                for name, tokens, wall, cpu in rows
            ],
            "apertus_drop_rate": float(rates["apertus"]),
            "mixed_drop_rate": float(rates["mixed"]),
            "zero_product_windows": float(zero_products),
        }
        files.write_json(_JSON.value, report, indent=1)


if __name__ == "__main__":
    cli.execute(main)
