"""Ablations: a base config plus named override sets, each with several seeds, then their comparison.

    result = run_ablation(load_ablation("configs/ablations/tiny.py"), "/tmp/tiny", variants=["baseline"])

An ablation file defines `get_ablation()` returning a dict:

    base:      a run config (`apertus_jax.config.schema.base_config()` schema)
    variants:  {name: {"section.field": value, ...}}  (dotted overrides of the base; insertion order), or
               {name: [overrides, overrides, ...]} (applied one after another); a value may be a function
               of the config so far (e.g. `lambda c: c.model.mlp_hidden * 3 // 2`), so a variant scales with
               the `sets` model
    seeds:     (0, 1, ...)                            (each variant runs once per seed: `seed` of the run)
    baseline:  the variant the comparison is made against

`sets` (`parse_sets` of the command line's `--set=KEY=VALUE`) change the base for every variant first;
`model.preset=NAME` makes the model section preset NAME's, the other `model.*` settings of the ablation (e.g.
a variant's `model.mlp_type`) applied on top; `train.steps=N` without a schedule field makes the schedule
follow it (`apertus_jax.config.schema.fit_schedule_to_steps`, said in the log).

Each run trains in WORKDIR/<variant>/seed<N> with `apertus_jax.jobs.pretrain.pretrain` (resuming if it has
checkpoints); a finished run leaves `ablation_done.json` and is skipped by the next call. All variants, and the
recorded config of every run finished in WORKDIR (`check_finished_runs`), are checked before any run starts. At
the end (and when every run was already finished) the comparison (`apertus_jax.studies.ablations.compare`) of every run of
the ablation in WORKDIR, this call's and earlier ones', is written to WORKDIR/comparison.png and
WORKDIR/comparison.md. A SIGTERM stops
the current run at a checkpoint and ends the ablation (call again to continue). The command line is
`python -m experiments.ablate`.
"""

from __future__ import annotations

import ast
import copy
import glob
import json
import os
import time

import jax
import ml_collections
from absl import logging

from apertus_jax import files
from apertus_jax.config.schema import Config, call_config, fit_schedule_to_steps, load_module, parse
from apertus_jax.jobs.pretrain import RERUN, pretrain
from apertus_jax.models.presets import model_section
from apertus_jax.records.config_record import first_difference, newest_config
from apertus_jax.studies.ablations.compare import compare
from apertus_jax.train.config import check_layout

DONE_FILE = "ablation_done.json"


def load_ablation(path: str) -> dict:
    """`get_ablation()` of the ablation file at `path`, checked.

    Raises:
      FileNotFoundError: no such file; ValueError: no `get_ablation`, or a malformed result;
        ConfigFileError (a ValueError): the file raised (one line naming its file and line).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--config={path}: no such ablation file (see configs/ablations/)")
    module = load_module(path, "ablation_config")
    if not hasattr(module, "get_ablation"):
        raise ValueError(f"{path} defines no get_ablation()")
    ablation = call_config(module, "get_ablation")
    missing = {"base", "variants", "seeds", "baseline"} - set(ablation)
    if missing:
        raise ValueError(f"{path}: get_ablation() lacks {sorted(missing)}")
    if ablation["baseline"] not in ablation["variants"]:
        raise ValueError(f"{path}: baseline {ablation['baseline']!r} is not a variant")
    return ablation


def _parse_value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_sets(entries: list[str]) -> dict:
    """`["a.b=1", ...]` -> `{"a.b": 1}` (values as Python literals, else strings).

    Raises:
      ValueError: an entry without "=".
    """
    overrides = {}
    for entry in entries:
        if "=" not in entry:
            raise ValueError(f"--set={entry!r} must be KEY=VALUE, e.g. --set=train.steps=1000")
        key, value = entry.split("=", 1)
        overrides[key] = _parse_value(value)
    return overrides


def apply_overrides(config: ml_collections.ConfigDict, overrides: dict) -> None:
    """Sets each dotted key of `overrides` in `config` (unlocked), in order; a callable value is called
    with the config first; `model.preset` first rebuilds the model section from that preset.

    Raises:
      ValueError: a key the schema does not have (one line).
    """
    overrides = dict(overrides)
    with config.unlocked():
        if "model.preset" in overrides:
            config.model = model_section(overrides.pop("model.preset"))
        for dotted, value in overrides.items():
            if callable(value):
                value = value(config)
            *path, key = dotted.split(".")
            node = config
            for part in path:
                if part not in node:
                    raise ValueError(f"override {dotted}: the config has no section {part!r}")
                node = node[part]
            if not isinstance(node, (ml_collections.ConfigDict, dict)) or key not in node:
                raise ValueError(f"override {dotted}: unknown key (schema: apertus_jax/config/schema.py)")
            if isinstance(node, ml_collections.ConfigDict) and isinstance(value, dict):
                value = ml_collections.ConfigDict(value)
            try:
                node[key] = value
            except TypeError as error:
                raise ValueError(f"override {dotted}={value!r}: {error}") from None


def _base(ablation: dict, sets: dict) -> tuple[ml_collections.ConfigDict, str | None]:
    """The ablation's base with `sets` applied, and the line saying the schedule follows `train.steps` (or
    None).

    Raises:
      ValueError: a bad `sets` key (one line naming --set).
    """
    base = copy.deepcopy(ablation["base"])
    try:
        apply_overrides(base, sets)
    except ValueError as error:
        raise ValueError(f"--set: {error}") from None
    return base, fit_schedule_to_steps(base, sets, flag="--set=")


def _run_config(ablation: dict, base: ml_collections.ConfigDict, name: str, seed: int) -> Config:
    """The validated config of variant `name`, seed `seed`, on `base` (raises ValueError naming the variant)."""
    config = copy.deepcopy(base)
    try:
        steps = ablation["variants"][name]
        for overrides in [steps] if isinstance(steps, dict) else steps:
            apply_overrides(config, overrides)
        apply_overrides(config, {"seed": int(seed)})
        parsed = parse(config)
        check_layout(parsed, jax.device_count(), jax.process_count())
    except ValueError as error:
        raise ValueError(f"variant {name!r}: {error}") from None
    return parsed


def variant_configs(
    ablation: dict, variants: list[str] | None, seeds: list[int] | None, sets: dict
) -> list[tuple[str, int, Config]]:
    """`(variant, seed, config)` of every run, in order, each config validated.

    Raises:
      ValueError: an unknown variant, a bad `sets` key (one line naming --set) or a config that fails
        validation (one line naming the variant).
    """
    names = list(ablation["variants"])
    unknown = [v for v in variants or [] if v not in names]
    if unknown:
        raise ValueError(f"--variants: unknown {unknown}; the ablation has {names}")
    base, fitted = _base(ablation, sets)
    if fitted:
        logging.info(fitted)
    return [
        (name, int(seed), _run_config(ablation, base, name, seed))
        for name in variants or names
        for seed in (seeds if seeds is not None else ablation["seeds"])
    ]


def finished_runs(workdir: str) -> list[tuple[str, int]]:
    """`(variant, seed)` of every run in WORKDIR that an earlier call finished (its `ablation_done.json`)."""
    found = []
    for path in sorted(glob.glob(os.path.join(workdir, "*", "seed*", DONE_FILE))):
        with open(path) as f:
            done = json.load(f)
        found.append((done["variant"], done["seed"]))
    return found


def check_finished_runs(ablation: dict, workdir: str, sets: dict) -> None:
    """Checks that every run an earlier call finished in WORKDIR recorded the config this call (its `sets`)
    gives it: the comparison covers them all.

    Raises:
      ValueError: one line naming the first run and setting that differ, and the fix.
    """
    base, _ = _base(ablation, sets)
    for name, seed in finished_runs(workdir):
        run_dir = os.path.join(workdir, name, f"seed{seed}")
        recorded = newest_config(run_dir)
        if name not in ablation["variants"] or recorded is None:
            continue
        wanted = json.loads(json.dumps(_run_config(ablation, base, name, seed).to_dict()))
        difference = first_difference(recorded, wanted, first=tuple(sets))  # a --set key first
        if difference:
            key, old, new = difference
            raise ValueError(
                f"{run_dir} finished earlier with {key}={old!r}, but this call gives it {key}={new!r}: repeat "
                "the --set of the call that trained it, or pass a new --workdir for these settings"
            )


def run_ablation(
    ablation: dict,
    workdir: str,
    *,
    variants: list[str] | None = None,
    seeds: list[int] | None = None,
    sets: dict | None = None,
) -> dict:
    """Trains every run not yet finished, then writes the comparison of every run in WORKDIR; returns
    `{"trained": [...], "skipped": [...], "outcome": "done" | "preempted", "comparison": (png, md) or None}`.

    Raises:
      ValueError: as `variant_configs` and `check_finished_runs` (before anything is written).
    """
    runs = variant_configs(ablation, variants, seeds, sets or {})
    check_finished_runs(ablation, workdir, sets or {})
    trained, skipped, started = [], [], time.time()
    for index, (name, seed, config) in enumerate(runs):
        run_dir = os.path.join(workdir, name, f"seed{seed}")
        label = f"{name}/seed{seed}"
        if os.path.exists(os.path.join(run_dir, DONE_FILE)):
            skipped.append(label)
            logging.info("[%d/%d] %s: finished earlier, skipped", index + 1, len(runs), label)
            continue
        done = len(trained)
        eta = (time.time() - started) / done * (len(runs) - index) if done else float("nan")
        logging.info(
            "[%d/%d] %s: training (ETA of the ablation %s)",
            index + 1,
            len(runs),
            label,
            "?" if eta != eta else f"{eta / 60:.1f} min",
        )
        os.makedirs(run_dir, exist_ok=True)
        outcome = pretrain(config, run_dir)
        if outcome != "done":
            logging.warning("%s: %s; %s", label, outcome, RERUN)
            return {"trained": trained, "skipped": skipped, "outcome": outcome, "comparison": None}
        files.write_json(
            os.path.join(run_dir, DONE_FILE), {"variant": name, "seed": seed, "outcome": outcome}
        )
        trained.append(label)
    # every run of the ablation in WORKDIR, not only this call's (compare leaves out unfinished ones)
    dirs = [
        os.path.dirname(path)
        for name in ablation["variants"]
        for path in sorted(glob.glob(os.path.join(workdir, name, "seed*", "metrics.jsonl")))
    ]
    finished = {name for name, _ in finished_runs(workdir)}
    baseline = ablation["baseline"] if ablation["baseline"] in finished else None
    comparison = compare(dirs, baseline, os.path.join(workdir, "comparison"))
    return {"trained": trained, "skipped": skipped, "outcome": "done", "comparison": comparison}
