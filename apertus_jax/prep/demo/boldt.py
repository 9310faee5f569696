"""Boldt's scored subsets on the demo corpus, with transparent rule-based scores (docs/recipe.md section 8).

Boldt scores German web documents with three classifiers (Coherence, Information Value, Educational
Quality) and keeps tiers above thresholds; Dense-Core is the intersection. The demo corpus has no
classifier output, so the German prose of its train split is scored by rules anyone can check:

- coherence: the share of non-empty lines that end like a sentence (`. ! ? : " » «`); quotes and poems
  whose lines break mid-sentence score low;
- information_value: 1 for technical documentation (Debian Handbook, Debian Reference), 0 otherwise
  (quotes, poems);
- educational_quality: 3 for the Debian Handbook (a textbook), 2 for the Debian Reference, 0 for the
  quotes and poems, plus `min(words, 500) / 1000` so that longer explanations rank higher within a source.

`THRESHOLDS` set the tiers as `apertus_jax.prep.filters.quality` does. `write_demo_subsets(directory)` writes
`pool.jsonl` (every document: the unfiltered "Random" pool), `coherence.jsonl`, `dense_core.jsonl` and
`heldout.jsonl` (the German prose of the held-out split, for evaluation), each line `{"id", "text", "coherence", "information_value", "educational_quality"}` (kind "jsonl"
components; `score_field: "educational_quality"` for the Sorted strategy).
"""

from __future__ import annotations

import os
import re

from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.prep.demo.inputs import write_jsonl
from apertus_jax.prep.filters.quality import DENSE_CORE, assign_tiers

THRESHOLDS = {"coherence": 0.5, "information_value": 0.5, "educational_quality": 2.0}
EDUCATIONAL_BASE = {"debian-handbook": 3.0, "debian-reference-de": 2.0}
DOCUMENTATION = frozenset(EDUCATIONAL_BASE)
SUBSETS = ("pool", "coherence", DENSE_CORE, "heldout")
_SENTENCE_END = re.compile(r"[.!?:\"»«]$")


def score_document(text: str, package: str) -> dict[str, float]:
    """The three rule-based scores of one German prose document (module docstring)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    coherence = sum(bool(_SENTENCE_END.search(line)) for line in lines) / max(len(lines), 1)
    return {
        "coherence": coherence,
        "information_value": float(package in DOCUMENTATION),
        "educational_quality": EDUCATIONAL_BASE.get(package, 0.0) + min(len(text.split()), 500) / 1000,
    }


def scored_documents(split: str = "train") -> list[dict]:
    """The German prose of the demo corpus's `split` with its scores and tiers, in file order."""
    documents = []
    for doc in load_demo_documents(split, ["german_prose"]):
        scores = score_document(doc["text"], doc["package"])
        tiers = assign_tiers(scores, THRESHOLDS)
        documents.append({"id": doc["doc_id"], "text": doc["text"], **scores, "tiers": tiers})
    return documents


def write_demo_subsets(directory: str) -> dict[str, str]:
    """Writes the subsets' JSONL files into `directory` (each atomically, `demo.write_jsonl`; kept if all are
    present); returns `{subset: path}`."""
    paths = {name: os.path.join(directory, f"{name}.jsonl") for name in SUBSETS}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    documents = scored_documents()
    members = {
        "pool": documents,
        "coherence": [d for d in documents if d["tiers"]["coherence"]],
        DENSE_CORE: [d for d in documents if d["tiers"][DENSE_CORE]],
        "heldout": scored_documents("heldout"),
    }
    for name, path in paths.items():
        write_jsonl([{k: v for k, v in d.items() if k != "tiers"} for d in members[name]], path)
    return paths
