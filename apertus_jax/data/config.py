"""The data config of the training pipeline: schema, defaults and validation.

A plain dict (or `ml_collections.ConfigDict`)::

    {
      "components": {                       # named document sources
        "web": {
          "kind": "arrayrecord",            # "arrayrecord" (shard sets from experiments.tokenize_data),
                                            # "jsonl" | "parquet" | "text" (raw, tokenized on the fly),
                                            # "demo" (apertus_jax.data.demo_corpus),
                                            # "seqio" (a registered seqio Task or Mixture; extra "seqio"),
                                            # "chat" | "preference" (post-training JSONL, read by
                                            #   apertus_jax.posttrain.pipelines; no stages, goldfish k 0)
                                            # "probes" | "canaries" (inserted at planned repetition
                                            #   counts, no weight: data.injection)
          "paths": ["/data/web"],           # shard set directories / raw files or directories (not demo, seqio)
          "weight": 1.0,                    # token share when no stage sets weights
          "epochs": None,                   # None: repeat forever; N: at most N passes (then the stage
                                            #   fails loudly if it needs more tokens)
          "order": "shuffle",               # "shuffle" (fresh order each epoch), "sorted" (ascending
                                            #   document score), "sequential" (file order)
          "take": None,                     # N: a fixed subset of N documents (chosen with split_seed,
                                            #   the same in every stage and epoch)
          "length_buckets": None,           # {"edges": [4096, 16384], "token_shares": [0.4, 0.3, 0.3]}:
                                            #   documents of < 4096, 4096-16383 and >= 16384 tokens give
                                            #   40/30/30% of the component's tokens (long documents
                                            #   upsampled; data.mixture.bucketed_component_dataset)
          "text_field": "text", "id_field": "id", "score_field": None,   # raw kinds
          "split": "train", "sources": None,                             # demo kind
          "task": None, "feature": "targets",   # seqio kind (and "split"): see data.seqio_import
        },
      },
      "stages": [                           # optional; default one endless stage with component weights
        {"name": "stage1", "until_tokens": 5_000_000_000_000, "weights": {"web": 0.7, "code": 0.3},
         "seed": 1},                        # seed optional: derived from the pipeline seed and stage index
        {"name": "cooldown", "until_tokens": None, "weights": {"web": 1.0}},
      ],
      "goldfish": {"k": 50, "h": 50, "hash": "apertus"},   # k = 0 disables; hash "apertus" | "mixed" |
                                            #   "canonical" (data.goldfish_canonical; h in words)
      "split_seed": 0,                      # fixes "take" subsets
    }

Stage boundaries are cumulative global token counts (targets of all hosts); only the last stage may be
endless (`until_tokens: None`). Weights are shares of tokens, turned into document proportions with
each component's mean document length. A "phased" curriculum (A then B) is two stages; a "sorted" one
is `order: "sorted"` (scores from the shard record headers or the raw `score_field`).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from apertus_jax.checks import check_number
from apertus_jax.data import injection
from apertus_jax.data.goldfish import APERTUS_H, APERTUS_K, HASHES
from apertus_jax.data.goldfish_canonical import CANONICAL_HASH

COMPONENT_KINDS = (
    "arrayrecord",
    "jsonl",
    "parquet",
    "text",
    "demo",
    "seqio",
    "chat",
    "preference",
    *injection.KINDS,
)
ORDERS = ("shuffle", "sorted", "sequential")
_COMPONENT_DEFAULTS = {
    "kind": None,
    "paths": None,
    "weight": 1.0,
    "epochs": None,
    "order": "shuffle",
    "take": None,
    "length_buckets": None,
    "text_field": "text",
    "id_field": "id",
    "score_field": None,
    "split": "train",
    "sources": None,
    "task": None,
    "feature": "targets",
    **injection.SPEC_DEFAULTS,  # the injected kinds' fields (data.injection)
}
_STAGE_DEFAULTS = {"name": None, "until_tokens": None, "weights": None, "seed": None}
GOLDFISH_DEFAULTS = {"k": APERTUS_K, "h": APERTUS_H, "hash": "apertus"}
_TOP_LEVEL = {"components", "stages", "goldfish", "split_seed"}


def _with_defaults(where: str, given: dict, defaults: dict) -> dict:
    unknown = set(given) - set(defaults)
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(defaults)}")
    return {**copy.deepcopy(defaults), **given}


def _positive_int(where: str, value: Any, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(
            f"{where} must be a positive integer{' or None' if allow_none else ''}, got {value!r}"
        )


def _length_buckets(where: str, buckets: Any) -> dict[str, list]:
    """{"edges": strictly increasing positive ints, "token_shares": len(edges) + 1 shares >= 0, normalized}."""
    if hasattr(buckets, "to_dict"):
        buckets = buckets.to_dict()
    if not isinstance(buckets, dict) or set(buckets) != {"edges", "token_shares"}:
        raise ValueError(f"{where} must be {{'edges': [...], 'token_shares': [...]}}, got {buckets!r}")
    edges, shares = list(buckets["edges"]), [float(s) for s in buckets["token_shares"]]
    for edge in edges:
        _positive_int(f"{where}['edges']", edge, False)
    if not edges or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"{where}['edges'] = {edges} must be one or more strictly increasing token counts")
    if len(shares) != len(edges) + 1:
        raise ValueError(
            f"{where}['token_shares'] needs {len(edges) + 1} shares (one per bucket), got {shares}"
        )
    for share in shares:
        check_number(f"{where}['token_shares']", share, low=0)
    if sum(shares) <= 0:
        raise ValueError(f"{where}['token_shares'] must have at least one share > 0")
    return {"edges": edges, "token_shares": [share / sum(shares) for share in shares]}


def normalize_data_config(data_config: Any) -> dict[str, Any]:
    """The validated config with every default filled in (a new plain dict).

    Raises:
      ValueError: naming the offending key, e.g. an unknown component kind, a stage weight for an
        unknown component, non-increasing stage boundaries, an endless stage before the last one.
    """
    if hasattr(data_config, "to_dict"):  # ml_collections.ConfigDict
        data_config = data_config.to_dict()
    if not isinstance(data_config, dict):
        raise ValueError(f"data_config must be a dict, got {type(data_config).__name__}")
    unknown = set(data_config) - _TOP_LEVEL
    if unknown:
        raise ValueError(f"data_config: unknown keys {sorted(unknown)}; allowed: {sorted(_TOP_LEVEL)}")
    if not data_config.get("components"):
        raise ValueError("data_config['components'] is empty: name at least one document source")

    components = {}
    for name, component in data_config["components"].items():
        where = f"data_config['components'][{name!r}]"
        component = _with_defaults(where, dict(component), _COMPONENT_DEFAULTS)
        if component["kind"] not in COMPONENT_KINDS:
            raise ValueError(f"{where}['kind'] = {component['kind']!r}; use one of {COMPONENT_KINDS}")
        if component["kind"] in injection.KINDS:  # inserted by the pipeline at planned counts, not mixed
            injection.validate_spec(where, component)
            components[name] = component
            continue
        if component["kind"] == "seqio" and not (isinstance(component["task"], str) and component["task"]):
            raise ValueError(f"{where}['task'] must name a registered seqio Task or Mixture")
        if component["kind"] not in ("demo", "seqio"):
            paths = component["paths"]
            if isinstance(paths, str):
                paths = [paths]
            if not paths:
                raise ValueError(f"{where}['paths'] is empty: list the {component['kind']} inputs")
            component["paths"] = [str(p) for p in paths]
        if component["order"] not in ORDERS:
            raise ValueError(f"{where}['order'] = {component['order']!r}; use one of {ORDERS}")
        if (
            component["order"] == "sorted"
            and component["kind"] in ("jsonl", "parquet", "text", "seqio")
            and not component["score_field"]
        ):
            raise ValueError(f"{where}: order 'sorted' needs a 'score_field' for raw documents")
        _positive_int(f"{where}['epochs']", component["epochs"])
        _positive_int(f"{where}['take']", component["take"])
        if component["length_buckets"] is None:
            # Absent rather than None: the pipeline fingerprint (of the normalized config) of a run without
            # buckets stays that of earlier versions, so their checkpoints still resume.
            del component["length_buckets"]
        else:
            component["length_buckets"] = _length_buckets(
                f"{where}['length_buckets']", component["length_buckets"]
            )
        check_number(f"{where}['weight']", component["weight"], low=0, low_open=True)
        components[name] = component

    mixed = {name: c["weight"] for name, c in components.items() if c["kind"] not in injection.KINDS}
    if not mixed:
        raise ValueError("data_config['components'] has only injected kinds: add a component to mix")
    stages_given = data_config.get("stages") or [{"name": "stage1", "weights": mixed}]
    stages, previous_end = [], 0
    for index, stage in enumerate(stages_given):
        where = f"data_config['stages'][{index}]"
        stage = _with_defaults(where, dict(stage), _STAGE_DEFAULTS)
        stage["name"] = stage["name"] or f"stage{index + 1}"
        weights = stage["weights"] or mixed
        missing = set(weights) - set(mixed)
        if missing:
            raise ValueError(
                f"{where}['weights'] names unknown components {sorted(missing)} (probes and canaries have "
                "no weight: they are inserted at their planned counts)"
            )
        for name, weight in weights.items():
            check_number(f"{where}['weights'][{name!r}]", weight, low=0)
        if not any(weight > 0 for weight in weights.values()):
            raise ValueError(f"{where}['weights'] must be >= 0 with at least one > 0, got {weights}")
        stage["weights"] = {name: float(w) for name, w in weights.items() if float(w) > 0}
        end = stage["until_tokens"]
        if end is None:
            if index != len(stages_given) - 1:
                raise ValueError(f"{where}: only the last stage may be endless (until_tokens None)")
        else:
            if isinstance(end, float) and end.is_integer():  # allow 5e12
                end = int(end)
            _positive_int(f"{where}['until_tokens']", end, False)
            stage["until_tokens"] = end
            if stage["until_tokens"] <= previous_end:
                raise ValueError(
                    f"{where}['until_tokens'] = {end} must exceed the previous boundary {previous_end}"
                )
            previous_end = stage["until_tokens"]
        if stage["seed"] is not None and (not isinstance(stage["seed"], int) or stage["seed"] < 0):
            raise ValueError(f"{where}['seed'] must be a non-negative integer, got {stage['seed']!r}")
        stages.append(stage)

    goldfish = _with_defaults(
        "data_config['goldfish']", dict(data_config.get("goldfish") or {}), GOLDFISH_DEFAULTS
    )
    if goldfish["hash"] not in (*HASHES, CANONICAL_HASH):
        raise ValueError(
            f"data_config['goldfish']['hash'] = {goldfish['hash']!r}; use one of {(*HASHES, CANONICAL_HASH)}"
        )
    if not isinstance(goldfish["k"], int) or goldfish["k"] < 0:
        raise ValueError(
            f"data_config['goldfish']['k'] must be an integer >= 0 (0 disables), got {goldfish['k']!r}"
        )
    _positive_int("data_config['goldfish']['h']", goldfish["h"], False)
    split_seed = data_config.get("split_seed", 0)
    if not isinstance(split_seed, int) or split_seed < 0:
        raise ValueError(f"data_config['split_seed'] must be a non-negative integer, got {split_seed!r}")
    return {"components": components, "stages": stages, "goldfish": goldfish, "split_seed": split_seed}


def default_pipeline() -> dict[str, Any]:
    """The demo pipeline: the vendored demo corpus, Goldfish with the Apertus settings."""
    return {"components": {"demo": {"kind": "demo"}}, "goldfish": dict(GOLDFISH_DEFAULTS), "split_seed": 0}


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """The `data` section of a run.

    Attributes:
      tokenizer: "demo" (a SentencePiece BPE of `demo_tokenizer_vocab` ids trained on the demo corpus,
        cached; `apertus_jax.train.inputs`) or any `apertus_jax.tokenizers.load_tokenizer` spec
        ("tekken", "sentencepiece:/path/m.model", "hf:/path/tokenizer.json").
      demo_tokenizer_vocab: ids of the demo BPE (>= 256 byte-fallback ids plus merges).
      seq_len: tokens per packed row (the model's inputs; rows hold seq_len + 1 ids).
      num_shards: data shards (0: one per process); fixing it makes the batches independent of the
        process count.
      pipeline: the pipeline's own config (this module's docstring), validated by `normalize_data_config`.

    Raises:
      ValueError: in `__post_init__`, one line naming the field ("data.<field>") and its valid range.
    """

    tokenizer: str = "demo"
    demo_tokenizer_vocab: int = 4096
    seq_len: int = 128
    num_shards: int = 0
    pipeline: dict = dataclasses.field(default_factory=default_pipeline)

    def __post_init__(self):
        if not isinstance(self.tokenizer, str) or not self.tokenizer:
            raise ValueError(
                f"data.tokenizer={self.tokenizer!r} must name a tokenizer, e.g. 'demo' or 'tekken'"
            )
        check_number("data.demo_tokenizer_vocab", self.demo_tokenizer_vocab, low=260, integer=True)
        check_number("data.seq_len", self.seq_len, low=2, integer=True)
        check_number("data.num_shards", self.num_shards, low=0, integer=True)
        object.__setattr__(self, "pipeline", normalize_data_config(self.pipeline))


def section() -> dict[str, Any]:
    """The `data` section of a run config: the defaults of `DataConfig` (the pipeline as given, unnormalized)."""
    fields = {f.name: f.default for f in dataclasses.fields(DataConfig) if f.name != "pipeline"}
    return {**fields, "pipeline": default_pipeline()}


def from_section(section: Any) -> DataConfig:
    """The validated `DataConfig` of a `data` section (dict or ConfigDict; `pipeline` normalized).

    Raises:
      ValueError: an unknown field, a value out of range or an invalid pipeline (one line).
    """
    section = section.to_dict() if hasattr(section, "to_dict") else dict(section)
    unknown = set(section) - {f.name for f in dataclasses.fields(DataConfig)}
    if unknown:
        raise ValueError(f"data: unknown fields {sorted(unknown)}")
    return DataConfig(**section)
