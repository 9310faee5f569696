"""Component kinds of the data pipeline: one typed spec class per kind, behind one registry.

A component of `data.pipeline.components` names its kind (`{"kind": "jsonl", "paths": [...], ...}`); the
kind's spec class (a frozen dataclass) declares the fields it takes, their defaults and their checks. Two
families:

- `DocumentSpec`: a document source mixed into the stages by token share (`weight`, `epochs`, `order`, `take`,
  `length_buckets`); `load(name, tokenizer)` returns its `Component`. Built in: "arrayrecord", "jsonl",
  "parquet", "text", "demo", "seqio" (`apertus_jax.data.components`), "megatron" (`apertus_jax.data.megatron.indexed`).
- `InjectedSpec` (`apertus_jax.data.memorization.injection`): documents inserted into the first stage at planned repetition
  counts, outside the mixture: "probes", "canaries" (`apertus_jax.data.memorization.probes`).

The built-in kinds are a table of names (`BUILTIN_KINDS`); their modules are imported when a config names
them, so importing the trainer loads no reader it does not use.

Other layers add kinds with `register_kind` (post-training registers "chat" and "preference", read by its own
batch sources; `docs/architecture.md` shows how to add one). A spec checks its own fields in `__post_init__`
with messages that start with the field name (`epochs=0 must be ...`); `parse_component` prefixes them with
the component's place in the config (`data.pipeline.components.web: `).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from apertus_jax.checks import check_choice, check_number
from apertus_jax.named import load_named

ORDERS = ("shuffle", "sorted", "sequential")
# The built-in kinds, "module:Class" by name: a kind's module is imported when a config first names it, so
# the trainer imports none of them (each module registers its classes with `register_kind`).
BUILTIN_KINDS = {
    "arrayrecord": "apertus_jax.data.components:ArrayRecordSpec",
    "jsonl": "apertus_jax.data.components:JsonlSpec",
    "parquet": "apertus_jax.data.components:ParquetSpec",
    "text": "apertus_jax.data.components:TextSpec",
    "demo": "apertus_jax.data.components:DemoSpec",
    "seqio": "apertus_jax.data.components:SeqioSpec",
    "probes": "apertus_jax.data.memorization.probes:ProbesSpec",
    "canaries": "apertus_jax.data.memorization.probes:CanariesSpec",
    "megatron": "apertus_jax.data.megatron.indexed:MegatronSpec",
}
_KINDS: dict[str, type[ComponentSpec]] = {}


def register_kind(cls: type[ComponentSpec]) -> type[ComponentSpec]:
    """Registers a spec class under its `kind` (usable as a class decorator); returns the class.

    Raises:
      ValueError: another class already holds the kind's name.
    """
    if _KINDS.get(cls.kind, cls) is not cls:
        raise ValueError(f"component kind {cls.kind!r} is already registered by {_KINDS[cls.kind].__name__}")
    _KINDS[cls.kind] = cls
    return cls


def kind_names() -> tuple[str, ...]:
    """The built-in kinds, then the registered ones in registration order."""
    return tuple(dict.fromkeys([*BUILTIN_KINDS, *_KINDS]))


def spec_class(kind: str) -> type[ComponentSpec]:
    """The spec class of `kind` (a built-in kind's module is imported on first use).

    Raises:
      ValueError: an unknown kind (one line listing the known ones).
    """
    if kind not in _KINDS and kind in BUILTIN_KINDS:
        _KINDS[kind] = load_named(BUILTIN_KINDS[kind])
    if kind not in _KINDS:
        raise ValueError(f"kind={kind!r} is not a component kind; use one of {kind_names()}")
    return _KINDS[kind]


def _as_plain(value: Any) -> Any:
    """ConfigDicts, tuples and nested containers as plain dicts and lists (JSON-like)."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    if isinstance(value, Mapping):
        return {k: _as_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_plain(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class ComponentSpec:
    """The fields every kind shares: none but the kind itself (a class attribute).

    `injected` (a class attribute) is True for the kinds inserted at planned counts instead of mixed by weight
    (`apertus_jax.data.memorization.injection.InjectedSpec`).
    """

    kind: ClassVar[str] = ""
    injected: ClassVar[bool] = False

    @classmethod
    def from_dict(cls, fields: Mapping[str, Any]) -> ComponentSpec:
        """The spec of a config dict without its "kind" key (missing fields take their defaults).

        Raises:
          ValueError: a field this kind does not take, or a value its checks refuse.
        """
        allowed = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(fields) - set(allowed))
        if unknown:
            raise ValueError(f"unknown keys {unknown} for kind {cls.kind!r}; it takes {sorted(allowed)}")
        return cls(**{name: _as_plain(value) for name, value in fields.items()})

    def to_dict(self) -> dict[str, Any]:
        """The config dict of this spec, every field included (`from_dict` of it gives an equal spec)."""
        return {"kind": self.kind, **_as_plain(dataclasses.asdict(self))}

    def describe(self) -> dict[str, Any]:
        """Where the documents come from and under which licence (the run's provenance record)."""
        return {"kind": self.kind, "licence": None}

    def check_inputs(self) -> None:
        """Checks the files this component reads with the checks its loading makes, without reading the
        documents (kinds that check nothing before loading keep this default).

        Raises:
          FileNotFoundError / ValueError: one line naming the file and the problem.
        """


@dataclasses.dataclass(frozen=True)
class LengthBuckets:
    """Documents grouped by token length, each group with its share of the component's tokens.

    Attributes:
      edges: strictly increasing token counts; bucket b holds lengths in [edges[b-1], edges[b]).
      token_shares: len(edges) + 1 shares >= 0, at least one > 0; normalized to sum to 1.
    """

    edges: tuple[int, ...]
    token_shares: tuple[float, ...]

    def __post_init__(self):
        edges = tuple(self.edges)
        for edge in edges:
            check_number("length_buckets.edges", edge, low=1, integer=True)
        if not edges or any(b <= a for a, b in zip(edges, edges[1:])):
            raise ValueError(
                f"length_buckets.edges={list(edges)} must be one or more strictly increasing token counts"
            )
        shares = tuple(float(s) for s in self.token_shares)
        if len(shares) != len(edges) + 1:
            raise ValueError(
                f"length_buckets.token_shares needs {len(edges) + 1} shares (one per bucket), got {list(shares)}"
            )
        for share in shares:
            check_number("length_buckets.token_shares", share, low=0)
        if sum(shares) <= 0:
            raise ValueError("length_buckets.token_shares must have at least one share > 0")
        object.__setattr__(self, "edges", tuple(int(e) for e in edges))
        object.__setattr__(self, "token_shares", tuple(s / sum(shares) for s in shares))

    @classmethod
    def of(cls, value: Any) -> LengthBuckets | None:
        """`value` as LengthBuckets: None, a LengthBuckets, or `{"edges": [...], "token_shares": [...]}`.

        Raises:
          ValueError: any other value.
        """
        if value is None or isinstance(value, LengthBuckets):
            return value
        value = _as_plain(value)
        if not isinstance(value, dict) or set(value) != {"edges", "token_shares"}:
            raise ValueError(
                f"length_buckets must be {{'edges': [...], 'token_shares': [...]}}, got {value!r}"
            )
        return cls(tuple(value["edges"]), tuple(value["token_shares"]))


def _positive_int_or_none(field: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise ValueError(f"{field}={value!r} must be a positive integer or None")


@dataclasses.dataclass(frozen=True)
class DocumentSpec(ComponentSpec):
    """A document source mixed into the stages (`apertus_jax.data.mixture`).

    Attributes:
      weight: token share when no stage sets weights (> 0).
      epochs: None repeats forever; N allows at most N passes (a stage that needs more fails loudly).
      order: "shuffle" (a fresh order each epoch), "sorted" (ascending document score), "sequential" (file
        order).
      take: N keeps a fixed subset of N documents (chosen with the pipeline's `split_seed`).
      length_buckets: token shares per document-length bucket (long documents upsampled), or None.
    """

    scored: ClassVar[bool] = False  # True: "sorted" order reads `score_field` (raw documents carry no score)

    weight: float = 1.0
    epochs: int | None = None
    order: str = "shuffle"
    take: int | None = None
    length_buckets: LengthBuckets | None = None

    def __post_init__(self):
        check_number("weight", self.weight, low=0, low_open=True)
        _positive_int_or_none("epochs", self.epochs)
        check_choice("order", self.order, ORDERS)
        _positive_int_or_none("take", self.take)
        object.__setattr__(self, "weight", float(self.weight))
        object.__setattr__(self, "length_buckets", LengthBuckets.of(self.length_buckets))
        if self.order == "sorted" and self.scored and not getattr(self, "score_field", None):
            raise ValueError("order='sorted' needs a score_field for raw documents")

    def to_dict(self) -> dict[str, Any]:
        spec = super().to_dict()
        if self.length_buckets is None:
            del spec["length_buckets"]  # absent when unset: the fingerprint of a plain component stays short
        return spec

    def load(self, name: str, tokenizer):
        """The component's documents (`apertus_jax.data.documents.Component`), tokenized with `tokenizer`.

        Raises:
          ValueError / FileNotFoundError: an empty source or a missing path.
        """
        raise NotImplementedError(f"kind {self.kind!r} does not load documents")

    def heldout_texts(self, path: str | None) -> list[str] | None:
        """Texts of the component's held-out documents: its own held-out split, or the file `path` (from
        `eval.heldout_paths`) read like the component; None when it has none.

        Raises:
          ValueError: a `path` for a kind that reads no held-out file (only raw kinds do).
        """
        if path is not None:
            raise ValueError(
                f"kind {self.kind!r} reads no held-out file (held-out files are jsonl, parquet or text)"
            )
        return None

    def unseen_language_texts(self) -> list[str] | None:
        """Texts in languages the component never trains on (an evaluation of transfer, reported apart from
        the held-out set, which is text of the training languages); None when the kind has none."""
        return None


def paths_tuple(paths: Any) -> tuple[str, ...]:
    """`paths` (one path or a sequence) as a tuple of strings."""
    if isinstance(paths, str):
        return (paths,)
    return tuple(str(p) for p in (paths or ()))


def check_paths(paths: tuple[str, ...], kind: str) -> None:
    """Raises ValueError (`paths=...`) for an empty path list."""
    if not paths:
        raise ValueError(f"paths is empty: list the {kind} inputs")


def parse_component(name: str, value: Any) -> ComponentSpec:
    """The typed spec of one `data.pipeline.components` entry (a dict with "kind", or a spec).

    Raises:
      ValueError: `data.pipeline.components.<name>: ...`, an unknown kind or field, or a bad value.
    """
    if isinstance(value, ComponentSpec):
        return value
    fields = _as_plain(value)
    if not isinstance(fields, dict):
        raise ValueError(f"data.pipeline.components.{name} must be a dict with a 'kind', got {value!r}")
    fields = dict(fields)
    try:
        return spec_class(fields.pop("kind", None)).from_dict(fields)
    except (ValueError, TypeError) as error:
        raise ValueError(f"data.pipeline.components.{name}: {error}") from None
