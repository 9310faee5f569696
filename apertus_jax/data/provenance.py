"""Where a component's documents come from: the records a run's provenance statement is built from.

Apertus states its training data's sources, licences and the opt-outs applied (Apertus section 3.1,
docs/recipe.md section 7). Each component kind describes itself (`ComponentSpec.describe`); these are the
records of the two kinds that carry more than a path: shard sets (their manifest's source, licence, counts
and tokenizer, and the preparation statistics of `experiments/prepare_data.py` when its `prep_stats.json`
lies next to the manifest) and the vendored demo corpus (each package's version, registry and licence).
"""

from __future__ import annotations

import json
import os

from apertus_jax.data import demo_corpus, shards

PREP_STATS = "prep_stats.json"


def prep_summary(report: dict) -> dict:
    """The parts of a `prep_stats.json` report a model's data statement needs.

    Returns `{"removed": {reason: {docs, tokens, by_language}}, "robots_by_agent": {agent: {docs, tokens}},
    "pii_replacements": {kind: count}, "tiers": [...]}` (the report is written by `apertus_jax.prep.stats`).
    """
    pii = {}
    for steps in report.get("stages", {}).values():
        for step in steps:
            for key, value in step.get("counters", {}).items():
                if key.startswith("pii/"):
                    pii[key.split("/", 1)[1]] = pii.get(key.split("/", 1)[1], 0) + int(value)
    return {
        "removed": report.get("removed", {}),
        "robots_by_agent": report.get("robots_by_agent", {}),
        "pii_replacements": pii,
        "tiers": report.get("tiers", []),
    }


def shard_set_record(path: str) -> dict:
    """A shard set's manifest facts and preparation summary (None when it was not written by prep).

    Raises:
      FileNotFoundError / ValueError: a missing or unreadable manifest.
    """
    manifest = shards.load_manifest(path)
    entry = {
        "path": manifest["directory"],
        "source": manifest.get("source"),
        "licence": manifest.get("licence"),
        "documents": manifest["documents"],
        "tokens": manifest["tokens"],
        "tokenizer": {k: manifest["tokenizer"].get(k) for k in ("name", "checksum")},
        "created": manifest.get("created"),
        "prep": None,
    }
    stats_path = os.path.join(manifest["directory"], PREP_STATS)
    if os.path.isfile(stats_path):
        with open(stats_path) as f:
            entry["prep"] = prep_summary(json.load(f))
    return entry


def demo_record(split: str, sources: list[str] | None) -> dict:
    """The demo corpus's packages (version, registry, licence, records) of the selected sources."""
    manifest = demo_corpus.manifest()
    packages = {source["name"]: source for source in manifest["sources"]}
    entries = []
    for asset, info in sorted(manifest["assets"].items()):
        corpus = asset.split(".")[0]
        if sources is not None and corpus not in sources:
            continue
        for package, records in sorted(info.get("records_by_package", {}).items()):
            source = packages.get(package, {})
            entries.append(
                {
                    "corpus": corpus,
                    "package": package,
                    "version": source.get("version"),
                    "registry": source.get("registry"),
                    "licence": source.get("licence"),
                    "records": records,
                }
            )
    return {"kind": "demo", "split": split, "packages": entries}
