"""The `data` section of a run: tokenizer, row length, shards, and the typed training pipeline.

`data.pipeline` is given as a dict (or ConfigDict) and parsed once, by `parse_pipeline`, into a
`PipelineSpec`::

    {
      "components": {                       # named sources; each entry's "kind" picks its typed spec
        "web": {"kind": "arrayrecord", "paths": ["/data/web"], "weight": 0.7},
        "code": {"kind": "jsonl", "paths": ["/data/code"], "epochs": 4, "take": 10_000},
        "probes": {"kind": "probes", "repetitions": [1, 8, 64], "spread_tokens": 2_000_000},
      },
      "stages": [                           # optional; default one endless stage with component weights
        {"name": "stage1", "until_tokens": 5_000_000_000_000, "weights": {"web": 0.7, "code": 0.3},
         "seed": 1},                        # seed optional: derived from the pipeline seed and stage index
        {"name": "cooldown", "until_tokens": None, "weights": {"web": 1.0}},
      ],
      "goldfish": {"k": 50, "h": 50, "hash": "apertus"},   # `apertus_jax.data.goldfish.drop_masks.GoldfishSpec`
      "split_seed": 0,                      # fixes "take" subsets
    }

The fields of each kind are those of its spec class (`apertus_jax.data.kinds` for the shared ones,
`apertus_jax.data.components` for the document kinds, `apertus_jax.data.memorization.probes` for probes and
canaries). Stage boundaries are cumulative global token counts (targets of all hosts); only the last stage
may be endless (`until_tokens: None`). Weights are shares of tokens, turned into document proportions with
each component's mean document length. A "phased" curriculum (A then B) is two stages; a "sorted" one is
`order: "sorted"` (scores from the shard record headers or the raw `score_field`). Injected kinds take no
weight: they are inserted into the first stage at their planned counts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from apertus_jax.checks import check_number
from apertus_jax.data.goldfish.drop_masks import GoldfishSpec
from apertus_jax.data.kinds import ComponentSpec, DocumentSpec, parse_component


def _plain(value: Any) -> Any:
    return value.to_dict() if hasattr(value, "to_dict") else value


@dataclasses.dataclass(frozen=True)
class StageSpec:
    """One curriculum stage: `weights` (token shares of document components; zeros are dropped) until the
    global target-token count `until_tokens` (None: endless, last stage only); `seed` None derives it from the
    pipeline seed and the stage index. An empty `name` becomes "stage<index + 1>" in the pipeline.

    Raises:
      ValueError: in `__post_init__`, a negative weight, no weight > 0, a bad boundary or seed (one line).
    """

    name: str = ""
    until_tokens: int | None = None
    weights: Mapping[str, float] = dataclasses.field(default_factory=dict)
    seed: int | None = None

    def __post_init__(self):
        for name, weight in self.weights.items():
            check_number(f"weights[{name!r}]", weight, low=0)
        if self.weights and not any(weight > 0 for weight in self.weights.values()):
            raise ValueError(f"weights must be >= 0 with at least one > 0, got {dict(self.weights)}")
        object.__setattr__(self, "weights", {n: float(w) for n, w in self.weights.items() if float(w) > 0})
        end = self.until_tokens
        if isinstance(end, float) and end.is_integer():  # allow 5e12
            object.__setattr__(self, "until_tokens", int(end))
        check_number("until_tokens", self.until_tokens, low=1, integer=True, allow_none=True)
        check_number("seed", self.seed, low=0, integer=True, allow_none=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "until_tokens": self.until_tokens,
            "weights": dict(self.weights),
            "seed": self.seed,
        }


@dataclasses.dataclass(frozen=True)
class PipelineSpec:
    """The validated training pipeline (module docstring); `parse_pipeline` builds one from a config dict.

    Attributes:
      components: {name: spec} in config order; at least one document component.
      stages: the curriculum; empty: one endless stage with the components' weights. A stage without weights
        takes those too.
      goldfish: the Goldfish settings of every row.
      split_seed: fixes `take` subsets.

    Raises:
      ValueError: in `__post_init__`, one line naming the key (`data.pipeline...`): no document component, a
        stage weight for an unknown or injected component, non-increasing stage boundaries, an endless stage
        before the last one.
    """

    components: Mapping[str, ComponentSpec]
    stages: tuple[StageSpec, ...] = ()
    goldfish: GoldfishSpec = GoldfishSpec()
    split_seed: int = 0

    def __post_init__(self):
        if not self.components:
            raise ValueError("data.pipeline.components is empty: name at least one document source")
        mixed = {name: spec.weight for name, spec in self.mixed().items()}
        if not mixed:
            raise ValueError("data.pipeline.components has no document source to mix (only injected kinds)")
        stages, previous_end = [], 0
        for index, stage in enumerate(self.stages or (StageSpec(),)):
            where = f"data.pipeline.stages[{index}]"
            unknown = set(stage.weights) - set(mixed)
            if unknown:
                raise ValueError(
                    f"{where}.weights names unknown components {sorted(unknown)} (probes and canaries have no "
                    "weight: they are inserted at their planned counts)"
                )
            if stage.until_tokens is None and index != len(self.stages) - 1 and self.stages:
                raise ValueError(f"{where}: only the last stage may be endless (until_tokens None)")
            if stage.until_tokens is not None and stage.until_tokens <= previous_end:
                raise ValueError(
                    f"{where}.until_tokens={stage.until_tokens} must exceed the previous boundary {previous_end}"
                )
            previous_end = stage.until_tokens or previous_end
            stages.append(
                dataclasses.replace(
                    stage, name=stage.name or f"stage{index + 1}", weights=dict(stage.weights) or mixed
                )
            )
        object.__setattr__(self, "stages", tuple(stages))
        check_number("data.pipeline.split_seed", self.split_seed, low=0, integer=True)

    def mixed(self) -> dict[str, DocumentSpec]:
        """The document components (mixed by weight), in config order."""
        return {n: s for n, s in self.components.items() if isinstance(s, DocumentSpec)}

    def injected(self) -> dict[str, ComponentSpec]:
        """The injected components (probes, canaries: `apertus_jax.data.memorization.injection.InjectedSpec`s), in config
        order."""
        return {n: s for n, s in self.components.items() if s.injected}

    def check_inputs(self) -> None:
        """Checks the files every component reads (`ComponentSpec.check_inputs`), before a run reads or
        writes anything.

        Raises:
          FileNotFoundError / ValueError: one line, "data.pipeline.components.NAME: " and the problem.
        """
        for name, spec in self.components.items():
            try:
                spec.check_inputs()
            except (FileNotFoundError, ValueError) as error:
                raise type(error)(f"data.pipeline.components.{name}: {error}") from None

    def to_dict(self) -> dict[str, Any]:
        """The normalized config dict: every default filled in (`parse_pipeline` of it gives an equal spec)."""
        return {
            "components": {name: spec.to_dict() for name, spec in self.components.items()},
            "stages": [stage.to_dict() for stage in self.stages],
            "goldfish": dataclasses.asdict(self.goldfish),
            "split_seed": self.split_seed,
        }


_TOP_LEVEL = ("components", "stages", "goldfish", "split_seed")


def _typed(where: str, cls, given: Any):
    """`cls(**given)` for a dict section of `data.pipeline`, errors prefixed with `where`."""
    given = dict(_plain(given) or {})
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; allowed: {allowed}")
    try:
        return cls(**given)
    except ValueError as error:
        raise ValueError(f"{where}.{error}") from None


def parse_pipeline(value: Any) -> PipelineSpec:
    """The typed pipeline of a `data.pipeline` dict (or ConfigDict; a PipelineSpec is returned as is).

    Raises:
      ValueError: one line naming the key (`data.pipeline...`): an unknown kind or field, a bad value, or a
        broken rule of `PipelineSpec`.
    """
    if isinstance(value, PipelineSpec):
        return value
    given = _plain(value)
    if not isinstance(given, Mapping):
        raise ValueError(f"data.pipeline must be a dict, got {type(value).__name__}")
    unknown = sorted(set(given) - set(_TOP_LEVEL))
    if unknown:
        raise ValueError(f"data.pipeline: unknown keys {unknown}; allowed: {sorted(_TOP_LEVEL)}")
    components = {
        name: parse_component(name, spec)
        for name, spec in dict(_plain(given.get("components")) or {}).items()
    }
    stages = tuple(
        _typed(f"data.pipeline.stages[{index}]", StageSpec, stage)
        for index, stage in enumerate(_plain(given.get("stages")) or ())
    )
    goldfish = _typed("data.pipeline.goldfish", GoldfishSpec, given.get("goldfish"))
    return PipelineSpec(components, stages, goldfish, given.get("split_seed", 0))


def default_pipeline() -> dict[str, Any]:
    """The demo pipeline: the vendored demo corpus, Goldfish with the Apertus settings."""
    return {
        "components": {"demo": {"kind": "demo"}},
        "goldfish": dataclasses.asdict(GoldfishSpec()),
        "split_seed": 0,
    }


# The arrays of every batch a run's data yields: int32 [rows, seq_len] each (`apertus_jax.data.pipeline`).
BATCH_KEYS = ("tokens", "targets", "positions", "segment_ids", "loss_mask")


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """The `data` section of a run.

    Attributes:
      tokenizer: "demo" (a SentencePiece BPE of `demo_tokenizer_vocab` ids trained on the demo corpus,
        cached; `apertus_jax.data.run_tokenizer`) or any `apertus_jax.tokenizers.load_tokenizer` spec
        ("tekken", "sentencepiece:/path/m.model", "hf:/path/tokenizer.json").
      demo_tokenizer_vocab: ids of the demo BPE (>= 256 byte-fallback ids plus merges).
      seq_len: tokens per packed row (the model's inputs; rows hold seq_len + 1 ids).
      num_shards: data shards (0: one per process); fixing it makes the batches independent of the
        process count.
      pipeline: the typed pipeline (a dict is parsed by `parse_pipeline`).

    Raises:
      ValueError: in `__post_init__`, one line naming the field ("data.<field>") and its valid range.
    """

    tokenizer: str = "demo"
    demo_tokenizer_vocab: int = 4096
    seq_len: int = 128
    num_shards: int = 0
    pipeline: PipelineSpec = dataclasses.field(default_factory=lambda: parse_pipeline(default_pipeline()))

    def __post_init__(self):
        if not isinstance(self.tokenizer, str) or not self.tokenizer:
            raise ValueError(
                f"data.tokenizer={self.tokenizer!r} must name a tokenizer, e.g. 'demo' or 'tekken'"
            )
        check_number("data.demo_tokenizer_vocab", self.demo_tokenizer_vocab, low=260, integer=True)
        check_number("data.seq_len", self.seq_len, low=2, integer=True)
        check_number("data.num_shards", self.num_shards, low=0, integer=True)
        object.__setattr__(self, "pipeline", parse_pipeline(self.pipeline))

    def to_dict(self) -> dict[str, Any]:
        """The section as a plain dict (the pipeline normalized)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {**fields, "pipeline": self.pipeline.to_dict()}


def section() -> dict[str, Any]:
    """The `data` section of a run config: the defaults of `DataConfig` (the pipeline as given, unnormalized)."""
    fields = {f.name: f.default for f in dataclasses.fields(DataConfig) if f.name != "pipeline"}
    return {**fields, "pipeline": default_pipeline()}


def from_section(section: Any) -> DataConfig:
    """The validated `DataConfig` of a `data` section (dict or ConfigDict; `pipeline` parsed).

    Raises:
      ValueError: an unknown field, a value out of range or an invalid pipeline (one line).
    """
    section = dict(_plain(section))
    unknown = set(section) - {f.name for f in dataclasses.fields(DataConfig)}
    if unknown:
        raise ValueError(f"data: unknown fields {sorted(unknown)}")
    return DataConfig(**section)
