"""datatrove pipeline steps of the preparation pipeline (Apertus 3.1, Boldt 3.1, Apertus 4.1.2).

Every step counts what it sees in datatrove's per-step stats, which the executors merge over tasks:
`docs_in`, `tokens_in`, `docs_removed`, `tokens_removed`, `reason/<reason>/{docs,tokens}`,
`reason/<reason>/lang/<lang>` (documents) and `lang/<lang>/{docs_in,tokens_in,docs_removed,tokens_removed}`,
plus step-specific counters (`agent/<agent>/...`, `pii/<type>`, `tier/<subset>/...`). Its time stat covers
only its own work, so documents / time is the step's throughput per worker. `apertus_jax.prep.stats` turns these into a report.

Documents carry `metadata["token_count"]` (set by `CountTokens`, used for token accounting),
`metadata[lang_key]` and optionally `metadata[source_key]` and `metadata[url_key]`.
"""

import json
import os
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.readers import JsonlReader
from datatrove.utils.batching import batched

from apertus_jax import files
from apertus_jax.data import shards
from apertus_jax.data.shards import MANIFEST, load_manifest
from apertus_jax.prep import shard_parts
from apertus_jax.prep.filters import decontam, pii, quality, toxicity
from apertus_jax.prep.filters.classifier import Classifier
from apertus_jax.prep.robots import compliance as robots
from apertus_jax.tokenizers import load_tokenizer

UNKNOWN_LANG = "und"


class PrepStep(PipelineStep):
    """Base: per-document accounting of kept/removed documents and tokens by reason and by language."""

    type = "apertus-prep"

    def __init__(self, lang_key: str = "lang"):
        super().__init__()
        self.lang_key = lang_key

    def lang(self, doc: Document) -> str:
        return str(doc.metadata.get(self.lang_key) or UNKNOWN_LANG)

    def account(self, doc: Document, removed_reason: str | None = None) -> None:
        tokens, lang = int(doc.metadata.get("token_count", 0)), self.lang(doc)
        self.stat_update("docs_in", f"lang/{lang}/docs_in")
        self.stat_update("tokens_in", f"lang/{lang}/tokens_in", value=tokens, unit="doc")
        if removed_reason is not None:
            self.stat_update(
                "docs_removed",
                f"lang/{lang}/docs_removed",
                f"reason/{removed_reason}/docs",
                f"reason/{removed_reason}/lang/{lang}",
            )
            self.stat_update(
                "tokens_removed",
                f"lang/{lang}/tokens_removed",
                f"reason/{removed_reason}/tokens",
                value=tokens,
                unit="doc",
            )


class CountTokens(PrepStep):
    """Sets `metadata["token_count"]` (tokens without BoD/EoD) with the pipeline's tokenizer spec."""

    name = "count tokens"

    def __init__(self, tokenizer: str = "tekken", lang_key: str = "lang"):
        super().__init__(lang_key)
        self.tokenizer_spec = tokenizer

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:

        tokenizer = load_tokenizer(self.tokenizer_spec)
        for doc in data:
            with self.track_time():
                doc.metadata["token_count"] = len(tokenizer.encode(doc.text))
                self.account(doc)
            yield doc


class RobotsFilter(PrepStep):
    """Retroactive robots.txt (Apertus 3.1.1): drops documents whose host opts out of the listed AI agents.

    Args:
      snapshot: robots.txt snapshot path (directory or JSONL; see `robots.RobotsSnapshot`).
      mode: "domain" (drop the host if any agent may not fetch `/`) or "url" (every agent must fetch the URL).
      agents: AI user agents (default: docs/recipe.md 7 list).
      url_key: metadata key of the document URL; documents without one are kept (counted as `no_url`).
    """

    name = "robots.txt"

    def __init__(
        self,
        snapshot: str,
        mode: str = "domain",
        agents=robots.AI_AGENTS,
        url_key: str = "url",
        lang_key: str = "lang",
    ):
        super().__init__(lang_key)
        if mode not in robots.MODES:
            raise ValueError(f"robots mode {mode!r} unknown; use one of {robots.MODES}")
        self.snapshot_path, self.mode, self.agents, self.url_key = snapshot, mode, tuple(agents), url_key

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        snapshot = robots.RobotsSnapshot(self.snapshot_path)
        by_host = {}  # domain mode: one verdict per host
        for doc in data:
            with self.track_time():
                url = doc.metadata.get(self.url_key)
                if not url:
                    blocked = []
                elif self.mode == "domain":
                    host = robots.host_of(url)
                    if host not in by_host:
                        by_host[host] = robots.check_document(url, snapshot, self.mode, self.agents)
                    blocked = by_host[host]
                else:
                    blocked = robots.check_document(url, snapshot, self.mode, self.agents)
                if not url:
                    self.stat_update("no_url")
                for agent in blocked:
                    self.stat_update(f"agent/{agent}/docs")
                    self.stat_update(f"agent/{agent}/tokens", value=int(doc.metadata.get("token_count", 0)))
                self.account(doc, "robots_opt_out" if blocked else None)
            if not blocked:
                yield doc


class AnonymizePII(PrepStep):
    """Replaces emails, IPs and valid IBANs with markers (`pii.anonymize_pii`), except in code/math sources."""

    name = "PII"

    def __init__(self, skip_sources=("code", "math"), source_key: str = "source", lang_key: str = "lang"):
        super().__init__(lang_key)
        self.skip_sources, self.source_key = frozenset(skip_sources), source_key

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        for doc in data:
            with self.track_time():
                self.account(doc)
                if doc.metadata.get(self.source_key) in self.skip_sources:
                    self.stat_update("docs_skipped")
                else:
                    doc.text, counts = pii.anonymize_pii(doc.text)
                    for kind, n in counts.items():
                        if n:
                            self.stat_update(f"pii/{kind}", value=n)
                    if any(counts.values()):
                        self.stat_update("docs_changed")
            yield doc


class Decontaminate(PrepStep):
    """Drops documents that contain a benchmark prompt (`decontam.Decontaminator`, docs/recipe.md 9).

    Args:
      benchmarks: JSONL of benchmark items; `prompt_key` holds the prompt text, `id_key` its id.
      report_dir: flagged pairs go to `<report_dir>/<rank>.jsonl` (`{"doc_id", "prompt_id", "overlap",
        "prompt_tokens"}` per line).
    """

    name = "decontamination"

    def __init__(
        self,
        benchmarks: str,
        report_dir: str,
        prompt_key: str = "prompt",
        id_key: str = "id",
        n: int = 8,
        min_block: int = 5,
        threshold: float = 0.5,
        lang_key: str = "lang",
    ):
        super().__init__(lang_key)
        self.prompts = _load_prompts(benchmarks, prompt_key, id_key)
        self.report_dir = report_dir
        self.n, self.min_block, self.threshold = n, min_block, threshold

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        decon = decontam.Decontaminator(self.prompts, self.n, self.min_block, self.threshold)
        path = os.path.join(self.report_dir, f"{rank:05d}.jsonl")
        with files.atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as report:
            for doc in data:
                with self.track_time():
                    flags = decon.check(doc.text)
                    for flag in flags:
                        report.write(
                            json.dumps(
                                {
                                    "doc_id": doc.id,
                                    "prompt_id": flag.prompt_id,
                                    "overlap": flag.overlap,
                                    "prompt_tokens": flag.prompt_tokens,
                                }
                            )
                            + "\n"
                        )
                    self.stat_update("flagged_pairs", value=len(flags))
                    self.account(doc, "benchmark_contamination" if flags else None)
                if not flags:
                    yield doc


def _load_prompts(path: str, prompt_key: str, id_key: str) -> dict[str, str]:
    """`{id: prompt}` from a benchmark JSONL (the line index when an item has no `id_key`).

    Raises:
      FileNotFoundError: no such file.
      ValueError: a line that is not a JSON object with a string `prompt_key`.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"benchmark prompts {path!r} not found (JSONL with {prompt_key!r})")
    prompts = {}
    with open(path, encoding="utf-8") as f:
        for index, line in enumerate(line for line in f if line.strip()):
            try:
                item = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}: item {index}: not JSON ({error.msg})") from None
            if not isinstance(item, dict) or not isinstance(item.get(prompt_key), str):
                raise ValueError(
                    f"{path}: item {index} has no string {prompt_key!r}; set decontam.prompt_key"
                )
            prompts[str(item.get(id_key, index))] = item[prompt_key]
    return prompts


class ScoreDocuments(PrepStep):
    """Scores documents with trained heads: `metadata["score_<head>"]` (float) for the languages each head covers.

    Args:
      heads: head name -> `{"path": safetensors head, "languages": list of languages or None for all}`.
      skip_sources: sources never scored (Apertus: no toxicity scoring of code and math).
      batch_size: documents embedded and scored together.
    """

    name = "classifier scores"

    def __init__(
        self,
        heads: dict,
        skip_sources=("code", "math"),
        source_key: str = "source",
        batch_size: int = 256,
        lang_key: str = "lang",
    ):
        super().__init__(lang_key)
        for name, head in heads.items():
            if not os.path.isfile(head["path"]):
                raise FileNotFoundError(
                    f"head {name!r}: {head['path']} not found; set its `labels` to train it"
                )
        self.heads, self.skip_sources, self.source_key = heads, frozenset(skip_sources), source_key
        self.batch_size = batch_size

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:

        classifiers = {name: Classifier.load(head["path"]) for name, head in self.heads.items()}
        for batch in batched(data, self.batch_size):
            with self.track_time(unit="batch"):
                features = {}  # (embedder name, document index) -> embedding, so shared embedders run once
                for name, classifier in classifiers.items():
                    languages = self.heads[name].get("languages")
                    chosen = [
                        i
                        for i, doc in enumerate(batch)
                        if doc.metadata.get(self.source_key) not in self.skip_sources
                        and (languages is None or self.lang(doc) in languages)
                    ]
                    key = classifier.embedder.name
                    missing = [i for i in chosen if (key, i) not in features]
                    if missing:
                        features.update(
                            zip(
                                ((key, i) for i in missing),
                                classifier.embedder([batch[i].text for i in missing]),
                            )
                        )
                    if chosen:
                        scores = classifier.score_features(np.stack([features[key, i] for i in chosen]))
                        for i, score in zip(chosen, scores):
                            batch[i].metadata[f"score_{name}"] = float(score)
                    self.stat_update(f"scored/{name}", value=len(chosen))
                for doc in batch:
                    self.account(doc)
            yield from batch


class ComputeToxicityThresholds(PipelineStep):
    """Single task: reads every scored document and writes per-language toxicity thresholds as JSON.

    Output `{"top_fraction": f, "thresholds": {lang: t}, "documents": {lang: n}}` (see
    `toxicity.language_thresholds`), written atomically to `output`.
    """

    name = "toxicity thresholds"
    type = "apertus-prep"

    def __init__(
        self,
        scored_dir: str,
        output: str,
        top_fraction: float = toxicity.TOP_FRACTION,
        score_key: str = "score_toxicity",
        lang_key: str = "lang",
    ):
        super().__init__()
        self.scored_dir, self.output, self.top_fraction = scored_dir, output, top_fraction
        self.score_key, self.lang_key = score_key, lang_key

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        scores = defaultdict(list)
        for doc in JsonlReader(self.scored_dir, glob_pattern="*.jsonl*").run():
            if self.score_key in doc.metadata:
                scores[str(doc.metadata.get(self.lang_key) or UNKNOWN_LANG)].append(
                    doc.metadata[self.score_key]
                )
        with self.track_time():
            thresholds = toxicity.language_thresholds(scores, self.top_fraction)
        result = {
            "top_fraction": self.top_fraction,
            "thresholds": thresholds,
            "documents": {lang: len(s) for lang, s in sorted(scores.items())},
        }
        files.write_json(self.output, result, indent=1, sort_keys=True)
        self.stat_update("languages", value=len(thresholds))
        yield from ()


class ToxicityFilter(PrepStep):
    """Removes documents at or above their language's threshold (from `ComputeToxicityThresholds`)."""

    name = "toxicity"

    def __init__(self, thresholds: str, score_key: str = "score_toxicity", lang_key: str = "lang"):
        super().__init__(lang_key)
        self.thresholds_path, self.score_key = thresholds, score_key

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        with open(self.thresholds_path) as f:
            thresholds = json.load(f)["thresholds"]
        for doc in data:
            with self.track_time():
                score = doc.metadata.get(self.score_key)
                toxic = score is not None and toxicity.is_toxic(score, self.lang(doc), thresholds)
                self.account(doc, "toxicity_top_fraction" if toxic else None)
            if not toxic:
                yield doc


class QualityTiers(PrepStep):
    """Boldt tiers: sets `metadata["tiers"]` (subsets the document is in) for documents with all tier scores.

    Args:
      thresholds: tier -> minimum score (`score_<tier>` metadata).
      keep: None keeps every document; a subset name ("coherence", ..., "dense_core") keeps only its members
        (documents without tier scores are removed too, reason `not_<keep>`).
    """

    name = "quality tiers"

    def __init__(self, thresholds: dict, keep: str | None = None, lang_key: str = "lang"):
        super().__init__(lang_key)
        if keep is not None and keep not in quality.SUBSETS:
            raise ValueError(f"quality keep={keep!r} unknown; use None or one of {quality.SUBSETS}")
        missing = [tier for tier in quality.TIERS if tier not in thresholds]
        if missing:
            raise ValueError(f"quality thresholds missing for tiers {missing}")
        self.thresholds, self.keep = dict(thresholds), keep

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        for doc in data:
            with self.track_time():
                scores = {tier: doc.metadata.get(f"score_{tier}") for tier in quality.TIERS}
                member = {}
                if None not in scores.values():
                    member = quality.assign_tiers(scores, self.thresholds)
                    doc.metadata["tiers"] = [subset for subset in quality.SUBSETS if member[subset]]
                    tokens = int(doc.metadata.get("token_count", 0))
                    self.stat_update("tier/scored/docs")
                    self.stat_update("tier/scored/tokens", value=tokens)
                    for subset in doc.metadata["tiers"]:
                        self.stat_update(f"tier/{subset}/docs")
                        self.stat_update(f"tier/{subset}/tokens", value=tokens)
                dropped = self.keep is not None and not member.get(self.keep, False)
                self.account(doc, f"not_{self.keep}" if dropped else None)
            if not dropped:
                yield doc


class WriteShards(PrepStep):
    """Tokenizes documents (`[BoD] + ids + [EoD]`) into an ArrayRecord shard set per task.

    Writes `<output_dir>/parts/<rank>/` with `shard_parts.PartWriter` (the training format, the same writer
    as `apertus_jax.prep.tokenize`); the record score is `metadata[score_key]` when present.
    `MergeShardManifests` then lists all parts in one manifest at `<output_dir>`. A task without documents
    writes nothing.

    Args:
      shard_tokens: shard size in tokens (see `shards.SHARD_TOKENS`).
      batch_documents: documents per `encode_batch` call.
    """

    name = "ArrayRecord shards"

    def __init__(
        self,
        output_dir: str,
        tokenizer: str = "tekken",
        source: str = "prepared",
        licence: str = "",
        score_key: str | None = "score_educational_quality",
        shard_tokens: int = shards.SHARD_TOKENS,
        lang_key: str = "lang",
        batch_documents: int = shard_parts.BATCH_DOCUMENTS,
    ):
        super().__init__(lang_key)
        self.output_dir, self.tokenizer_spec, self.source, self.licence = (
            output_dir,
            tokenizer,
            source,
            licence,
        )
        self.score_key, self.shard_tokens, self.batch_documents = score_key, shard_tokens, batch_documents

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        stream = shard_parts.batches(data, self.batch_documents)
        if stream is None:
            return
        with shard_parts.PartWriter(
            self.output_dir,
            rank,
            self.tokenizer_spec,
            source=self.source,
            licence=self.licence,
            score_key=self.score_key,
            shard_tokens=self.shard_tokens,
        ) as part:
            for batch in stream:
                with self.track_time(unit="batch"):
                    part.write_batch(batch)
                    for doc in batch:
                        self.account(doc)
                yield from batch


SUMMED_MANIFEST_FIELDS = ("documents", "tokens", "files", "skipped_empty_documents", "replaced_invalid_utf8")


class MergeShardManifests(PipelineStep):
    """Single task: one manifest at `output_dir` listing the shards of every `parts/<rank>/` set.

    Counts (`SUMMED_MANIFEST_FIELDS`, where the parts have them) are summed; `tasks` is the number of parts.
    With `publish_to`, `output_dir` (a staging directory) is then renamed to `publish_to`, replacing an
    existing set there, so readers never see a half-written set. The merged set reads with
    `apertus_jax.data.shards.ShardSource(output_dir or publish_to, tokenizer)`. `inputs` names what the run
    read (its input files or folder), for the error of an empty input.
    Raises:
      FileNotFoundError: no part was written (every document of `inputs` was removed, or they are empty).
    """

    name = "merge shard manifests"
    type = "apertus-prep"

    def __init__(self, output_dir: str, inputs: Sequence[str], publish_to: str | None = None):
        super().__init__()
        self.output_dir, self.inputs, self.publish_to = output_dir, [str(p) for p in inputs], publish_to

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:

        parts_dir = os.path.join(self.output_dir, "parts")
        parts = (
            sorted(p for p in os.listdir(parts_dir) if not p.startswith("."))
            if os.path.isdir(parts_dir)
            else []
        )
        if not parts:
            raise FileNotFoundError(
                f"no documents to write from {', '.join(self.inputs)}: the input is empty or every document "
                "was removed"
            )
        merged = None
        for part in parts:
            manifest = load_manifest(os.path.join(parts_dir, part))
            manifest.pop("directory")
            for shard in manifest["shards"]:
                shard["path"] = f"parts/{part}/{shard['path']}"
            if merged is None:
                merged = {**manifest, "shards": [], "tasks": 0}
                merged.update({key: 0 for key in SUMMED_MANIFEST_FIELDS if key in manifest})
            merged["shards"] += manifest["shards"]
            merged["tasks"] += 1
            for key in SUMMED_MANIFEST_FIELDS:
                if key in manifest:
                    merged[key] += manifest[key]
            merged["created"] = max(merged["created"], manifest["created"])
        files.write_text(os.path.join(self.output_dir, MANIFEST), json.dumps(merged, indent=2) + "\n")
        if self.publish_to is not None:
            files.publish_directory(self.output_dir, self.publish_to)
        self.stat_update("documents", value=merged["documents"])
        self.stat_update("tokens", value=merged["tokens"])
        yield from ()
