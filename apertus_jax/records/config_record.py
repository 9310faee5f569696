"""`config.json`: the config a run trained with, written by a loop hook and read back by the jobs that use the run.

A fresh run writes `config.json` (`ConfigRecord`, when the loop starts); a run resumed at step N with the same
values leaves it; one resumed with other values (e.g. more `train.steps`) writes `config.stepN.json` beside it
instead of rewriting the original. `newest_config` reads the one a workdir last ran with; `first_difference`
names the first setting two such records differ in (a rerun of an ablation checks its finished runs with it).
"""

from __future__ import annotations

import json
import os
import re

import jax
from absl import logging

from apertus_jax import files
from apertus_jax.train.hooks import Hook, LoopContext

CONFIG = "config.json"


def record_config(workdir: str, config_dict: dict, resumed_step: int | None) -> str:
    """Writes the run config (module docstring); returns the path written."""
    path = os.path.join(workdir, CONFIG)
    if resumed_step is not None and os.path.exists(path):
        with open(path) as f:
            if json.load(f) == json.loads(json.dumps(config_dict)):
                return path
        path = os.path.join(workdir, f"config.step{resumed_step}.json")
        logging.warning("resumed with a config that differs from config.json; recorded it in %s", path)
    files.write_json(path, config_dict, indent=2)
    return path


def newest_config(workdir: str) -> dict | None:
    """The run config `workdir` last ran with: its `config.stepN.json` of the largest N, else its
    `config.json` (module docstring); None without either."""
    steps = [
        int(name[len("config.step") : -len(".json")])
        for name in (os.listdir(workdir) if os.path.isdir(workdir) else ())
        if re.fullmatch(r"config\.step\d+\.json", name)
    ]
    name = f"config.step{max(steps)}.json" if steps else CONFIG
    try:
        with open(os.path.join(workdir, name)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def first_difference(
    recorded: dict, wanted: dict, first: tuple[str, ...] = ()
) -> tuple[str, object, object] | None:
    """`(dotted key, recorded value, wanted value)` of the first setting that differs between two config dicts
    as JSON holds them (the dotted keys `first`, then in `wanted`'s order, then keys only `recorded` has); None
    when equal. A key one of them lacks has the value None there."""

    def at(config: dict, dotted: str):
        for part in dotted.split("."):
            config = config.get(part) if isinstance(config, dict) else None
        return config

    for key in first:
        if at(recorded, key) != at(wanted, key):
            return key, at(recorded, key), at(wanted, key)
    for key in [*wanted, *(k for k in recorded if k not in wanted)]:
        old, new = recorded.get(key), wanted.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            inner = first_difference(old, new)
            if inner:
                return (f"{key}.{inner[0]}", *inner[1:])
        elif old != new:
            return key, old, new
    return None


class ConfigRecord(Hook):
    """Writes `config.json` (process 0) when the loop starts."""

    def __init__(self, config_dict: dict):
        self.config_dict = config_dict

    def on_save(self, step: int, context: LoopContext) -> None:
        if step == context.step and jax.process_index() == 0:
            record_config(context.workdir, self.config_dict, context.step if context.resumed else None)
