"""`provenance.json`: what a run trained on, written by a loop hook; the model card rendered from it.

`ProvenanceRecord` rewrites it at start-up and after every checkpoint, stating the run's data as Apertus states
its data's sources, licences and opt-outs (Apertus section 3.1, docs/recipe.md section 7)::

    {"step": N, "tokenizer": {name, checksum},
     "tokens_consumed": {component: target tokens the batch source handed out so far, all processes},
     "tokens_consumed_total": ..., "components": {component: its kind's description}}

Each component kind describes itself (`ComponentSpec.describe`: shard sets with their manifests and
preparation statistics, the demo corpus's packages, raw files by path, probes by their package). `model_card`
renders the record as the Markdown card `apertus_jax.trained.export` writes beside a HF checkpoint.
"""

from __future__ import annotations

import json
import os

import jax
import numpy as np
from jax.experimental import multihost_utils

from apertus_jax import files
from apertus_jax.records.runs import check_workdir_exists
from apertus_jax.train.hooks import Hook, LoopContext

PROVENANCE = "provenance.json"


def all_processes_tokens(local: dict[str, int]) -> dict[str, int]:
    """`local` counts summed over every process (a collective when multi-host; every process must call it)."""
    if jax.process_count() == 1:
        return {name: int(n) for name, n in local.items()}
    # int32 halves: without x64, an int64 array would be truncated on its way through JAX.
    counts = np.array(list(local.values()), np.int64)
    halves = np.stack([counts >> 31, counts & ((1 << 31) - 1)]).astype(np.int32)
    gathered = np.asarray(multihost_utils.process_allgather(halves)).astype(np.int64)
    total = (gathered[:, 0] << 31).sum(0) + gathered[:, 1].sum(0)
    return {name: int(n) for name, n in zip(local, total)}


class ProvenanceRecord(Hook):
    """Writes `provenance.json` (module docstring) at start-up and after every checkpoint; every process
    takes part in the count (a collective), process 0 writes.

    Args:
      components: {name: description} of what the run's batch source reads (`ComponentSpec.describe` of the
        pipeline's components, or a job's own data).
    """

    def __init__(self, components: dict[str, dict]):
        self.components = components

    def on_save(self, step: int, context: LoopContext) -> None:
        consumed = all_processes_tokens(context.batches.consumed().get("tokens", {}))
        tokenizer = context.run.tokenizer
        record = {
            "step": int(step),
            "tokenizer": {"name": tokenizer.name, "checksum": tokenizer.checksum},
            "tokens_consumed": consumed,
            "tokens_consumed_total": sum(consumed.values()),
            "components": self.components,
        }
        if jax.process_index() == 0:
            files.write_text(
                os.path.join(context.workdir, PROVENANCE),
                json.dumps(record, indent=1, sort_keys=True) + "\n",
            )


def load_provenance(workdir: str) -> dict:
    """The run's provenance record.

    Raises:
      FileNotFoundError, NotADirectoryError: as `check_workdir_exists`; no provenance record.
    """
    check_workdir_exists(workdir)
    path = os.path.join(workdir, PROVENANCE)
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
        "Full record: `training_data.json`.",
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
