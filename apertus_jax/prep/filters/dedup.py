"""Deduplication on datatrove's own dedup steps: exact document hashes and MinHash near-duplicates.

Document dedup before every other filter, as in the FineWeb pipelines (Penedo et al. 2024, "The FineWeb
Datasets": MinHash dedup on datatrove). First exact duplicates (`datatrove.pipeline.dedup.exact_dedup`: one
64-bit hash of the text per document; of each group of copies the one with the lowest index in its task's
input is kept), then near-duplicates among the survivors (`datatrove.pipeline.dedup.minhash`: word n-gram
shingles, `num_buckets` LSH bands of `hashes_per_bucket` minhashes, union-find clusters, one document kept
per cluster). Two documents whose shingle sets have Jaccard similarity s share a band with probability
`1 - (1 - s^r)^b` (b bands of r hashes), so s above the threshold `(1/b)^(1/r)` (0.72 for datatrove's
default b=14, r=8) is removed with high probability and s well below it is kept.

Helper stages (each a datatrove executor, see `apertus_jax.prep.executors`):
  exact_signatures  (T tasks)  read -> ExactDedupSignature          -> <work_dir>/dedup/exact/signatures
  exact_duplicates  (1 task)   ExactFindDedups                      -> <work_dir>/dedup/exact/duplicates
  minhash_signatures (T tasks) read -> ExactDedupFilter -> MinhashDedupSignature
  minhash_buckets   (b tasks)  MinhashDedupBuckets                  -> <work_dir>/dedup/minhash/buckets
  minhash_clusters  (1 task)   MinhashDedupCluster                  -> <work_dir>/dedup/minhash/remove
The filter stage then drops the duplicates with `RemoveDuplicates`, which wraps datatrove's filters and
counts removed documents and tokens per reason and language like every other prep step.

datatrove's filters address documents by their index in a task's input stream, so every stage reads
`input_dir` with the same reader and the same number of tasks T. Output depends only on T, not on the
number of workers.
"""

import collections
import os
import time

from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.dedup.exact_dedup import (
    ExactDedupConfig,
    ExactDedupFilter,
    ExactDedupSignature,
    ExactFindDedups,
)
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.utils.hashing import HashConfig
from datatrove.utils.word_tokenizers import WhitespaceTokenizer

from apertus_jax.prep.steps import PrepStep

EXACT_REASON = "exact_duplicate"
NEAR_REASON = "near_duplicate"
STAGES = ("exact_signatures", "exact_duplicates", "minhash_signatures", "minhash_buckets", "minhash_clusters")


# datatrove 0.10's default xxhash passes str to xxhash, which xxhash>=4 rejects; its sha1 path encodes first.
HASH = HashConfig(precision=64, hash_fc="sha1")


def document_text(doc: Document) -> str:
    """What exact dedup hashes: the document text, verbatim."""
    return doc.text


def exact_config() -> ExactDedupConfig:
    return ExactDedupConfig(content_getter=document_text, hash_config=HASH)


def minhash_config(section) -> MinhashConfig:
    """datatrove's `MinhashConfig` from `config.dedup.minhash` (n_grams, num_buckets, hashes_per_bucket,
    seed)."""
    return MinhashConfig(
        n_grams=int(section["n_grams"]),
        num_buckets=int(section["num_buckets"]),
        hashes_per_bucket=int(section["hashes_per_bucket"]),
        seed=int(section["seed"]),
        hash_config=HASH,
    )


def jaccard_threshold(num_buckets: int, hashes_per_bucket: int) -> float:
    """The LSH threshold `(1/b)^(1/r)`: Jaccard similarity at which a pair is a candidate with probability
    about 1 - 1/e (Leskovec, Rajaraman, Ullman, Mining of Massive Datasets, section 3.4)."""
    return (1.0 / num_buckets) ** (1.0 / hashes_per_bucket)


def detection_probability(jaccard: float, num_buckets: int, hashes_per_bucket: int) -> float:
    """Probability `1 - (1 - s^r)^b` that two documents with shingle Jaccard `s` share a band."""
    return 1.0 - (1.0 - jaccard**hashes_per_bucket) ** num_buckets


def word_tokenizer() -> WhitespaceTokenizer:
    """datatrove's language-independent word tokenizer (spaCy's multilingual `xx`), for the shingles."""
    return WhitespaceTokenizer()


def minhash_signature_step(output_folder: str, config: MinhashConfig) -> MinhashDedupSignature:
    return MinhashDedupSignature(output_folder, config=config, language=word_tokenizer())


def _folders(work_dir: str) -> dict[str, str]:
    root = os.path.join(work_dir, "dedup")
    return {
        "exact_signatures": os.path.join(root, "exact", "signatures"),
        "exact_duplicates": os.path.join(root, "exact", "duplicates"),
        "minhash_signatures": os.path.join(root, "minhash", "signatures"),
        "minhash_buckets": os.path.join(root, "minhash", "buckets"),
        "minhash_clusters": os.path.join(root, "minhash", "remove"),
    }


def build_dedup_stages(config, reader) -> dict[str, list]:
    """The helper stages of the module docstring that `config.dedup` enables (dict in run order).

    Args:
      config: the prep config; reads `work_dir` and `dedup {exact {enabled}, minhash {enabled, n_grams,
        num_buckets, hashes_per_bucket, seed}}`.
      reader: callable returning a fresh datatrove reader of `input_dir` (the same one the filter stage uses).
    """
    dedup, folders = config.dedup, _folders(config.work_dir)
    stages = {}
    exact_filter = []
    if dedup.exact.enabled:
        stages["exact_signatures"] = [
            reader(),
            ExactDedupSignature(folders["exact_signatures"], exact_config()),
        ]
        stages["exact_duplicates"] = [
            ExactFindDedups(folders["exact_signatures"], folders["exact_duplicates"], exact_config())
        ]
        exact_filter = [ExactDedupFilter(folders["exact_duplicates"], exact_config())]
    if dedup.minhash.enabled:
        minhash = minhash_config(dedup.minhash)
        stages["minhash_signatures"] = [
            reader(),
            *exact_filter,
            minhash_signature_step(folders["minhash_signatures"], minhash),
        ]
        stages["minhash_buckets"] = [
            MinhashDedupBuckets(folders["minhash_signatures"], folders["minhash_buckets"], config=minhash)
        ]
        stages["minhash_clusters"] = [
            MinhashDedupCluster(folders["minhash_buckets"], folders["minhash_clusters"], config=minhash)
        ]
    return stages


def stage_tasks(config, stage: str) -> int:
    """Tasks of a helper stage: T for the readers, `num_buckets` for the bucket stage, else 1."""
    if stage in ("exact_signatures", "minhash_signatures"):
        return config.executor.tasks
    if stage == "minhash_buckets":
        return int(config.dedup.minhash.num_buckets)
    return 1


def filter_steps(config, lang_key: str = "lang") -> list:
    """The `RemoveDuplicates` steps of the filter stage (after `CountTokens`, before robots.txt)."""
    folders, steps = _folders(config.work_dir), []
    if config.dedup.exact.enabled:
        steps.append(
            RemoveDuplicates(
                ExactDedupFilter(folders["exact_duplicates"], exact_config()), EXACT_REASON, lang_key
            )
        )
    if config.dedup.minhash.enabled:
        steps.append(RemoveDuplicates(MinhashDedupFilter(folders["minhash_clusters"]), NEAR_REASON, lang_key))
    return steps


class RemoveDuplicates(PrepStep):
    """Runs a datatrove dedup filter and accounts every document it drops under `reason`.

    datatrove's filters yield the kept documents in input order, so every input document before the next
    kept one was removed. The step's time stat is the filter's own time (upstream reading excluded).

    Args:
      inner: `ExactDedupFilter` or `MinhashDedupFilter` (or any order-preserving filter step).
      reason: the removal reason in the report (`exact_duplicate`, `near_duplicate`).
    """

    def __init__(self, inner, reason: str, lang_key: str = "lang"):
        self.name = f"dedup: {reason}"  # before PipelineStep.__init__, which names the stats after it
        super().__init__(lang_key)
        self.inner, self.reason = inner, reason

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        pending = collections.deque()
        upstream = 0.0

        def tap():
            nonlocal upstream
            iterator = iter(data)
            while True:
                start = time.perf_counter()
                doc = next(iterator, None)
                upstream += time.perf_counter() - start
                if doc is None:
                    return
                pending.append(doc)
                yield doc

        start = time.perf_counter()
        for kept in self.inner.run(tap(), rank, world_size):
            while pending[0] is not kept:
                self.account(pending.popleft(), self.reason)
            self.account(pending.popleft())
            self.stats.time_stats.update(time.perf_counter() - start - upstream)
            yield kept
            start, upstream = time.perf_counter(), 0.0
        while pending:
            self.account(pending.popleft(), self.reason)
