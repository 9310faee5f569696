"""Run an ablation: a base config plus named override sets, each with several seeds, then compare them.

    python -m experiments.ablate --config=configs/ablations/apertus_recipe.py --workdir=/tmp/apertus_recipe
    python -m experiments.ablate --config=configs/ablations/apertus_recipe.py --variants=llama,full --seeds=0
    python -m experiments.ablate --config=... --set=model.preset=apertus-1.5b --set=train.steps=20000

An ablation file defines `get_ablation()` returning a dict:

    base:      a run config (`apertus_jax.train.config.base_config()` schema)
    variants:  {name: {"section.field": value, ...}}  (dotted overrides of the base; insertion order), or
               {name: [overrides, overrides, ...]} (applied one after another); a value may be a function
               of the config so far (e.g. `lambda c: c.model.mlp_hidden * 3 // 2`), so a variant scales with
               the `--set` model
    seeds:     (0, 1, ...)                            (each variant runs once per seed: `seed` of the run)
    baseline:  the variant the comparison is made against

`--set=KEY=VALUE` (repeatable; VALUE a Python literal, else a string) changes the base for every variant
first; `model.preset=NAME` makes the model section preset NAME's (as `experiments.pretrain` does), the other
`model.*` settings of the ablation (e.g. a variant's `model.mlp_type`) applied on top.

Each run trains in WORKDIR/<variant>/seed<N> with `apertus_jax.train.loop.train` (resuming if it has
checkpoints); a finished run leaves `ablation_done.json` and is skipped by the next call. All variants are
validated before any run starts. At the end (and when every run was already finished) the comparison
(`experiments.compare_runs`) is written to WORKDIR/comparison.png and WORKDIR/comparison.md. A SIGTERM stops
the current run at a checkpoint and ends the ablation (rerun the command to continue). A bad file, variant
name or override ends with one line on stderr and exit status 2, with nothing written.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import json
import os
import sys
import time

import ml_collections
from absl import flags, logging

from experiments import cli


def _define_flags() -> None:
    """The command line's flags, defined when the job runs (not on import: tests and notebooks import this
    module beside other jobs that define --config and --workdir too)."""
    global _CONFIG, _VARIANTS, _SEEDS, _WORKDIR, _SET
    _CONFIG = flags.DEFINE_string("config", None, "Ablation file (configs/ablations/NAME.py).")
    _VARIANTS = flags.DEFINE_list("variants", None, "Run only these variants (default: all).")
    _SEEDS = flags.DEFINE_list("seeds", None, "Run only these seeds (default: the ablation's).")
    _WORKDIR = flags.DEFINE_string(
        "workdir", None, "Parent folder of the runs (default workdir/ablations/NAME)."
    )
    _SET = flags.DEFINE_multi_string("set", [], "KEY=VALUE override of the base config (repeatable).")


DONE_FILE = "ablation_done.json"


def load_ablation(path: str) -> dict:
    """`get_ablation()` of the ablation file at `path`, checked.

    Raises:
      FileNotFoundError: no such file; ValueError: no `get_ablation`, or a malformed result.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--config={path}: no such ablation file (see configs/ablations/)")
    spec = importlib.util.spec_from_file_location("ablation_config", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "get_ablation"):
        raise ValueError(f"{path} defines no get_ablation()")
    ablation = module.get_ablation()
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
    from apertus_jax.models.presets import model_section

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
                raise ValueError(f"override {dotted}: unknown key (schema: apertus_jax/train/config.py)")
            if isinstance(node, ml_collections.ConfigDict) and isinstance(value, dict):
                value = ml_collections.ConfigDict(value)
            try:
                node[key] = value
            except TypeError as error:
                raise ValueError(f"override {dotted}={value!r}: {error}") from None


def variant_configs(
    ablation: dict, variants: list[str] | None, seeds: list[int] | None, sets: dict
) -> list[tuple[str, int, ml_collections.ConfigDict]]:
    """`(variant, seed, config)` of every run, in order, each config validated.

    Raises:
      ValueError: an unknown variant or a config that fails validation (one line naming the variant).
    """
    import jax

    from apertus_jax.train.config import validate

    names = list(ablation["variants"])
    unknown = [v for v in variants or [] if v not in names]
    if unknown:
        raise ValueError(f"--variants: unknown {unknown}; the ablation has {names}")
    runs = []
    for name in variants or names:
        for seed in seeds if seeds is not None else ablation["seeds"]:
            config = copy.deepcopy(ablation["base"])
            try:
                apply_overrides(config, sets)
                steps = ablation["variants"][name]
                for overrides in [steps] if isinstance(steps, dict) else steps:
                    apply_overrides(config, overrides)
                apply_overrides(config, {"seed": int(seed)})
                validate(config, jax.device_count(), jax.process_count())
            except ValueError as error:
                raise ValueError(f"variant {name!r}: {error}") from None
            runs.append((name, int(seed), config))
    return runs


def run_ablation(
    ablation: dict,
    workdir: str,
    *,
    variants: list[str] | None = None,
    seeds: list[int] | None = None,
    sets: dict | None = None,
) -> dict:
    """Trains every run not yet finished, then writes the comparison; returns `{"trained": [...],
    "skipped": [...], "outcome": "done" | "preempted", "comparison": (png, md) or None}`.

    Raises:
      ValueError: as `variant_configs` (before anything is written).
    """
    from apertus_jax.train.loop import train
    from experiments import compare_runs

    runs = variant_configs(ablation, variants, seeds, sets or {})
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
        outcome = train(config, run_dir)
        if outcome != "done":
            logging.warning("%s: %s; rerun the command to continue", label, outcome)
            return {"trained": trained, "skipped": skipped, "outcome": outcome, "comparison": None}
        with open(os.path.join(run_dir, DONE_FILE), "w") as f:
            json.dump({"variant": name, "seed": seed, "outcome": outcome}, f)
        trained.append(label)
    dirs = [os.path.join(workdir, name, f"seed{seed}") for name, seed, _ in runs]
    baseline = ablation["baseline"] if any(n == ablation["baseline"] for n, _, _ in runs) else runs[0][0]
    comparison = compare_runs.compare(dirs, baseline, os.path.join(workdir, "comparison"))
    return {"trained": trained, "skipped": skipped, "outcome": "done", "comparison": comparison}


def _enable_compilation_cache() -> None:
    """The persistent XLA cache of `experiments.pretrain` (seeds of one variant compile once)."""
    import jax

    from apertus_jax.train.inputs import cache_dir

    if not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", os.path.join(cache_dir(), "xla"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def main(argv) -> None:
    del argv
    if not _CONFIG.value:
        print("error: --config=configs/ablations/NAME.py is required", file=sys.stderr)
        sys.exit(2)
    _enable_compilation_cache()
    name = os.path.splitext(os.path.basename(_CONFIG.value))[0]
    workdir = _WORKDIR.value or os.path.join("workdir", "ablations", name)
    try:
        ablation = load_ablation(_CONFIG.value)
        seeds = [int(s) for s in _SEEDS.value] if _SEEDS.value else None
        result = run_ablation(
            ablation, workdir, variants=_VARIANTS.value, seeds=seeds, sets=parse_sets(_SET.value)
        )
    except (ValueError, FileNotFoundError) as error:
        print("error: " + " ".join(str(error).split()), file=sys.stderr)
        sys.exit(2)
    print(json.dumps(result, indent=2))
    if result["comparison"]:
        with open(result["comparison"][1]) as f:
            print(f.read())


if __name__ == "__main__":
    _define_flags()
    cli.run_absl(main)
