"""The config layer: the run schema as a ConfigDict, parsed once into typed sections.

A config file in `configs/` is a Python file whose `get_config()` returns `base_config()` with changed values;
absl flags override single values (`--config.train.steps=100`). The schema is the key set of `base_config()`:
a config file or override that adds, misspells or drops a key is rejected. `parse` turns the ConfigDict into a
`Config` (every section typed and checked, `data.pipeline` included) before anything is built or written;
nothing below this layer receives or reads a ConfigDict.

Sections and their owners: the trainer's `RunConfig` (`apertus_jax.train.config`: `seed`, `model`, `data`,
`train`, `optim`, `mesh`, `checkpoint`, `faults`, `metrics`, `profile`), `posttrain`
(`apertus_jax.posttrain.config`) and `eval` (`apertus_jax.eval.config`), the sections of the jobs above the
trainer. The parsed `Config` is a `RunConfig` with those two sections added, keyed as on the command line.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import os
import traceback
from collections.abc import Iterable
from typing import Any

import ml_collections

from apertus_jax import extras
from apertus_jax.data import config as data_config
from apertus_jax.eval import config as eval_config
from apertus_jax.eval.config import EvalConfig
from apertus_jax.models import presets as model_presets
from apertus_jax.models.partitioning import MeshConfig
from apertus_jax.optim import config as optim_config
from apertus_jax.posttrain import config as posttrain_config
from apertus_jax.posttrain.config import PosttrainConfig
from apertus_jax.train.config import (
    CheckpointConfig,
    FaultsConfig,
    MetricsConfig,
    RunConfig,
    TrainConfig,
)
from apertus_jax.train.metrics import ProfileConfig


@dataclasses.dataclass(frozen=True)
class Config(RunConfig):
    """A parsed run config: the trainer's sections (a `RunConfig`: `seed`, `model`, `data`, `train`, `optim`,
    `mesh`, `checkpoint`, `faults`, `metrics`, `profile`) and those of the jobs above it. Its attributes are
    the command line's keys: `config.train.steps` is `--config.train.steps`. A `Config` is the trainer's
    config as it is (`Run(config)`); the trainer reads only its own sections.

    Attributes:
      posttrain, eval: the post-training and in-loop evaluation sections.
      model_preset: the model preset the model section started from (`model.preset`, a name of
        `apertus_jax.models.presets`); set on the command line, it replaces the whole model section by that
        preset's fields, other `--config.model.*` overrides applied on top. The fields are `model`.
    """

    posttrain: PosttrainConfig = dataclasses.field(default_factory=PosttrainConfig)
    eval: EvalConfig = dataclasses.field(default_factory=EvalConfig)
    model_preset: str = "tiny"

    def to_dict(self) -> dict[str, Any]:
        """The config as a plain dict of the `base_config()` schema, every default filled in and the pipeline
        normalized (`parse` of it gives an equal Config): what `config.json` records."""
        out = super().to_dict()
        out["model"] = {"preset": self.model_preset, **out["model"]}
        out["posttrain"] = dataclasses.asdict(self.posttrain)
        out["eval"] = dataclasses.asdict(self.eval)
        return {key: out[key] for key in base_config()}


def _fields(cls) -> dict:
    return {f.name: f.default for f in dataclasses.fields(cls)}


def base_config() -> ml_collections.ConfigDict:
    """Defaults of every section, each from its owner; config files change values, never keys."""
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.model = model_presets.model_section("tiny")
    c.data = ml_collections.ConfigDict(data_config.section())
    c.train = ml_collections.ConfigDict(_fields(TrainConfig))
    c.optim = ml_collections.ConfigDict(optim_config.section())
    c.mesh = ml_collections.ConfigDict(_fields(MeshConfig))
    c.checkpoint = ml_collections.ConfigDict(_fields(CheckpointConfig))
    c.faults = ml_collections.ConfigDict(_fields(FaultsConfig))
    c.metrics = ml_collections.ConfigDict(_fields(MetricsConfig))
    c.posttrain = ml_collections.ConfigDict(posttrain_config.section())
    c.profile = ml_collections.ConfigDict(_fields(ProfileConfig))
    c.eval = ml_collections.ConfigDict(eval_config.section())
    return c


# Component kinds that read through an optional extra (`apertus_jax.extras`), checked when a config is parsed.
KIND_EXTRAS = {"parquet": "prep", "seqio": "seqio"}


def _keys(c, prefix=""):
    keys = set()
    for k, v in c.items():
        keys.add(prefix + k)
        if isinstance(v, (dict, ml_collections.ConfigDict)) and prefix + k != "data.pipeline":
            keys |= _keys(v, prefix + k + ".")
    return keys


def key_paths(config: Any, prefix: str = "") -> set[str]:
    """Every dotted key path of a nested ConfigDict or dict (`data.pipeline.goldfish.k` included)."""
    paths = set()
    for key, value in config.items():
        paths.add(prefix + key)
        if isinstance(value, (dict, ml_collections.ConfigDict)):
            paths |= key_paths(value, prefix + key + ".")
    return paths


def closest_keys(key: str, known: set[str] | list[str], n: int = 2) -> list[str]:
    """Up to `n` leaf keys of `known` closest to the unknown dotted `key`, anywhere in the schema, best first.

    A candidate qualifies when its last part holds the unknown last part as one of its `_`-separated words
    (`train.lr` -> `optim.peak_lr`) or is `difflib`-similar to it (ratio >= 0.6), or the whole paths are
    (ratio >= 0.8); candidates rank by the sum of both ratios, the shared word adding 0.5.
    """
    leaves = [k for k in known if not any(other.startswith(k + ".") for other in known)]
    leaf = key.rpartition(".")[2]
    scored = []
    for candidate in leaves:
        candidate_leaf = candidate.rpartition(".")[2]
        word = leaf in candidate_leaf.split("_")
        leaf_ratio = difflib.SequenceMatcher(None, leaf, candidate_leaf).ratio()
        path_ratio = difflib.SequenceMatcher(None, key, candidate).ratio()
        if word or leaf_ratio >= 0.6 or path_ratio >= 0.8:
            scored.append((-(leaf_ratio + path_ratio + 0.5 * word), candidate))
    return [candidate for _, candidate in sorted(scored)[:n]]


def _plain(section: Any) -> dict:
    return section.to_dict() if hasattr(section, "to_dict") else dict(section)


def parse(config: ml_collections.ConfigDict | dict) -> Config:
    """The typed `Config` of a run config (a ConfigDict of the `base_config()` schema, or its `to_dict()`).

    Raises:
      ValueError: one line naming the offending key or field and what to do (an unknown or missing key, a
        value out of range, an invalid pipeline, a component kind whose extra is not installed).
    """
    expected, got = _keys(base_config()), _keys(config)
    if got != expected:
        unknown, missing = sorted(got - expected), sorted(expected - got)
        close = closest_keys(unknown[0], expected) if unknown else []
        hint = f"; {unknown[0]}: did you mean {' or '.join(close)}?" if close else ""
        raise ValueError(
            f"config keys differ from the schema (apertus_jax/config/schema.py): unknown {unknown}, "
            f"missing {missing}{hint}"
        )
    sections = dict(
        seed=config["seed"],
        model=model_presets.from_section(_plain(config["model"])),
        data=data_config.from_section(config["data"]),
        train=TrainConfig(**_plain(config["train"])),
        optim=optim_config.from_section(_plain(config["optim"])),
        mesh=MeshConfig(**_plain(config["mesh"])),
        checkpoint=CheckpointConfig(**_plain(config["checkpoint"])),
        faults=FaultsConfig(**_plain(config["faults"])),
        metrics=MetricsConfig(**_plain(config["metrics"])),
        profile=ProfileConfig(**_plain(config["profile"])),
    )
    for name, spec in sections["data"].pipeline.components.items():
        if spec.kind in KIND_EXTRAS:
            extras.require(KIND_EXTRAS[spec.kind], f"data.pipeline.components.{name} (kind {spec.kind!r})")
    return Config(
        **sections,
        posttrain=PosttrainConfig(**_plain(config["posttrain"])),
        eval=EvalConfig(**_plain(config["eval"])),
        model_preset=str(config["model"]["preset"]),
    )


def parse_recorded(record: dict) -> Config:
    """The typed `Config` of a run's recorded `config.json` (`Config.to_dict()` of the version that trained it).

    Keys the schema gained after the record was written take their defaults (a new option leaves older
    workdirs readable, with the behaviour they were trained with when the default is the old behaviour);
    `data.pipeline` is taken as recorded. Unknown keys are still refused.

    Raises:
      ValueError: as `parse`.
    """

    def fill(defaults: dict, recorded: dict, prefix: str) -> dict:
        out = dict(defaults)
        for key, value in recorded.items():
            nested = isinstance(value, dict) and isinstance(defaults.get(key), dict)
            if nested and prefix + key != "data.pipeline":
                out[key] = fill(defaults[key], value, prefix + key + ".")
            else:
                out[key] = value
        return out

    return parse(fill(base_config().to_dict(), record, ""))


def overridden_keys(argv: list[str], prefix: str = "") -> list[str]:
    """The dotted keys that `--config.<prefix>KEY=VALUE` overrides in `argv` set, without the prefix
    (`prefix="run."`: the run config of a study config)."""
    start = "--config." + prefix
    return [a[len(start) :].split("=")[0] for a in argv if a.startswith(start)]


def set_on_command_line(key: str, argv: list[str]) -> bool:
    """Whether a `--config.*` override in `argv` sets the dotted `key`: the key itself, a key within it or
    the section that holds it (`data.pipeline.components.udhr` by `--config.data.pipeline.components.udhr.weight`
    or `--config.data.pipeline.components`); otherwise its value is the config file's."""
    return any(k == key or k.startswith(key + ".") or key.startswith(k + ".") for k in overridden_keys(argv))


def apply_preset_override(config: ml_collections.ConfigDict, argv: list[str]) -> None:
    """Gives `--config.model.preset=NAME` its meaning: the model section becomes preset NAME's fields, with the
    other `--config.model.*` overrides in `argv` applied on top (the config file's own model fields are
    dropped). Without a preset override, nothing changes.

    Raises:
      ValueError: NAME is not a model preset (one line listing the valid names).
    """
    names = set(overridden_keys(argv, "model."))
    if "preset" not in names:
        return
    overrides = {name: config.model[name] for name in names - {"preset"}}
    with config.unlocked():
        config.model = model_presets.model_section(config.model.preset, **overrides)


# The schedule fields that follow an overridden `train.steps` (`fit_schedule_to_steps`): the LR schedule's token
# counts and AdEMAMix's warmups, counted in updates.
SCHEDULE_FIELDS = ("total_tokens", "warmup_tokens", "decay_tokens", "alpha_warmup_steps", "b3_warmup_steps")


def fit_schedule_to_steps(
    config: ml_collections.ConfigDict, overridden: Iterable[str], flag: str = "--config."
) -> str | None:
    """Gives a quick experiment's `train.steps=N` a schedule that ends with it: when the dotted keys
    `overridden` (e.g. `["train.steps"]`) hold `train.steps` and none of `SCHEDULE_FIELDS`,
    `optim.total_tokens` becomes the tokens of N steps (by the batch plan) and the other schedule fields keep
    their share of it. Returns the line that says so (for the log; `flag` is how the command line sets a
    key: `--config.` or `--set=`), or None when nothing changed.
    """
    overridden = set(overridden)
    if "train.steps" not in overridden or overridden & {f"optim.{f}" for f in SCHEDULE_FIELDS}:
        return None
    try:
        total = TrainConfig(steps=config.train.steps, batch_plan=config.train.batch_plan).plan.tokens_at_step(
            config.train.steps
        )
        old = int(config.optim.total_tokens)
    except (ValueError, TypeError):  # a bad steps or batch plan: `parse` names it
        return None
    if total == old:
        return None
    fitted = {name: int(config.optim[name]) * total // old for name in SCHEDULE_FIELDS[1:]}
    with config.unlocked():
        config.optim.total_tokens = total
        for name, value in fitted.items():
            config.optim[name] = value
    changes = ", ".join(f"{name}={value:,}" for name, value in {"total_tokens": total, **fitted}.items())
    return (
        f"train.steps={config.train.steps:,} overridden without the schedule: the schedule follows it "
        f"(optim.{changes}; the config's shares of its total); set {flag}optim.total_tokens etc. to choose it"
    )


class ConfigFileError(ValueError):
    """An exception raised inside a config file, while it was executed or one of its functions ran: the
    message is one line naming the file, the line and the exception
    (`configs/x.py:12: NameError: name 'foo' is not defined`)."""


def _raised_in(path: str, error: BaseException) -> str:
    """`PATH:LINE: TYPE: MESSAGE` of `error` raised inside the config file `path`: LINE is the last line of
    that file its traceback passes through (a syntax error's own line; none when the call itself failed),
    PATH is relative to the working directory when the file is under it."""
    target, line, message = os.path.realpath(path), None, _message(error)
    if isinstance(error, SyntaxError):
        message = error.msg
        if error.filename and os.path.realpath(error.filename) == target:
            line = error.lineno
    for frame, number in traceback.walk_tb(error.__traceback__):
        if os.path.realpath(frame.f_code.co_filename) == target:
            line = number
    shown = os.path.relpath(path)
    shown = path if shown.startswith(os.pardir) else shown
    where = f"{shown}:{line}" if line else shown
    return f"{where}: {type(error).__name__}: {' '.join(message.split())}"


def _message(error: BaseException) -> str:
    """What `error` says: its one argument as text (a KeyError's key unquoted; an exception wrapped in
    another, as ml_collections wraps a locked config's KeyError in an AttributeError, unwrapped), else
    `str(error)`."""
    while len(error.args) == 1 and isinstance(error.args[0], BaseException):
        error = error.args[0]
    return str(error.args[0]) if len(error.args) == 1 else str(error)


def load_module(path: str, name: str = "config_file"):
    """The Python module of a config file (`configs/...py`), executed once.

    Raises:
      ValueError: `path` is not a file. ConfigFileError: executing it raised (one line naming the file and
        line).
    """
    if not os.path.isfile(path):
        raise ValueError(f"--config={path} is not a file")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - whatever the file raises is the user's to fix, in one line
        raise ConfigFileError(_raised_in(path, error)) from error
    return module


def call_config(module, function: str, *args):
    """`module.FUNCTION(*args)` of a config file's module (`load_module`): a config file's `get_config(...)`.

    Raises:
      ConfigFileError: the call raised (one line naming the file and the line of it that failed).
    """
    try:
        return getattr(module, function)(*args)
    except Exception as error:  # noqa: BLE001 - as in `load_module`
        raise ConfigFileError(_raised_in(module.__file__, error)) from error
