"""Deterministic figures per processor kind: which record a fresh run must give, and how far kinds drift apart.

    verdict = check(measurement.deterministic, fresh, record, results.kind(), samples)
    assert not verdict.disagreements, verdict.reference

On one processor kind (`results.processor()`: model name, widest vector instruction set, family and model) and
one stack (`results.stack()`: the JAX, hence the XLA, that compiles them) the documented runs are bitwise
reproducible; across kinds they are not, nor across stacks (docs/stacks.md). A record's kind names both
(`results.kind()`: "AMD EPYC (AVX2, family 25 model 1) with jax 0.10.2"). Across processors: XLA:CPU's reciprocal square root
starts from the processor's own estimate instruction, and YNNPACK, which runs the dots and reductions, picks its
kernels by instruction set (docs/results.md, "Across processor kinds"). So a results file keeps, beside the figures the
docs quote (`values`, the latest measurement), the deterministic values of every kind measured on the same
code (`processors`; with the seconds of each kind's latest measurement where the docs quote them per kind,
`Measurement.times`). A fresh run on a kind with a record must give that record bit for bit; on a kind without
one it must agree with `values` within twice the spread measured across kinds and across last-bit
perturbations of one kind (the `processor_spread` measurement); a regression demonstration (the
`check_regressions` measurement) shows that both rules catch deliberate bugs.

Invariant: a kind's record stays beside a new measurement of its stack only if the new measurement's kind
reproduced its own previous record (the code did not move the values); otherwise the stack's other kinds'
records are dropped as stale. The records of another stack are its own: a measurement leaves them as they are
(CI's fresh runs re-check the main stack's records on every run; the current stack's are recorded with
`--processor_only` beside them).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from collections.abc import Mapping

from absl import logging

from tools.measure import results

# XLA flags that move the last bits of the CPU runs on one machine the way another processor kind does: the
# exactly rounded reciprocal square root instead of the processor's estimate; XLA's own reductions instead of
# YNNPACK's; Eigen's dots and XLA's reductions; the elementwise functions without fused multiply-adds (as
# `benchmarks.cpu_ops` shows, each changes the bits of some ops and no other).
PERTURBATIONS = {
    "rsqrt_exact": "--xla_cpu_enable_platform_dependent_math=false",
    "xla_reductions": "--xla_cpu_experimental_ynn_fusion_type=dot",
    "eigen_dots": "--xla_cpu_experimental_ynn_fusion_type=",
    "no_fma": "--xla_cpu_max_isa=SSE4_2",
}
# The flags under which every op of `benchmarks.cpu_ops` gives the same bits on every processor emulated:
# exact rsqrt, Eigen's dots, XLA's reductions, generated code capped at AVX2 (docs/results.md).
PORTABLE_FLAGS = (
    "--xla_cpu_enable_platform_dependent_math=false --xla_cpu_experimental_ynn_fusion_type= "
    "--xla_cpu_max_isa=AVX2"
)
# The measurements whose deterministic values come out of floating-point training or evaluation: those the
# perturbations are run for (the others: compiled memory plans, counts and integer hashes).
PERTURBED = ("demo", "evaluation", "posttrain", "goldfish_study")
# A tolerance is this many times the measured spread: room for a kind not sampled, no more (docs/results.md).
MARGIN = 2.0


def leaves(values: Mapping, prefix: str = "") -> dict[str, object]:
    """The values of a nested dict by dotted path (`{"a": {"b": 1}}` -> `{"a.b": 1}`), in order."""
    flat = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            flat.update(leaves(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def spreads(samples: Mapping[str, Mapping]) -> dict[str, float]:
    """The spread of each value over `samples` {label: deterministic values}: max - min of a number, 0.0 for
    a value every sample gives alike, `math.inf` for a string or a missing value that differs."""
    found: dict[str, list] = {}
    for values in samples.values():
        for path, value in leaves(values).items():
            found.setdefault(path, []).append(value)
    count = len(samples)
    spread = {}
    for path, seen in found.items():
        if len(seen) == count and all(map(_number, seen)):
            spread[path] = float(max(seen) - min(seen))
        else:
            spread[path] = 0.0 if len(seen) == count and all(v == seen[0] for v in seen) else math.inf
    return spread


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a fresh run was compared with (`reference`: the record and the rule) and where it disagreed
    (`disagreements`: `PATH RECORDED -> FRESH`)."""

    reference: str
    disagreements: list[str]


def check(
    deterministic: tuple[str, ...],
    fresh: Mapping,
    record: Mapping,
    kind: str,
    samples: Mapping[str, Mapping],
) -> Verdict:
    """Compares the `deterministic` values of a fresh run with a results `record`: exactly with the record of
    processor `kind` if it has one, else with the record's `values` within `MARGIN` x the spread of each value
    over `samples` ({label: deterministic values}, the `processor_spread` measurement's; none: exactly)."""

    def picked(values: Mapping) -> dict[str, object]:
        return leaves({k: values.get(k) for k in deterministic})

    own = record.get("processors", {}).get(kind)
    if own is not None:
        expected, tolerance = picked(own["values"]), {}
        reference = f"exactly, the record of {kind} ({own['commit'][:7]}, {own['date']})"
    else:
        expected = picked(record["values"])
        tolerance = {path: MARGIN * s for path, s in spreads(samples).items()}
        reference = (
            f"within {MARGIN:g}x the measured spread, the record of {record['machine']['processor']} "
            f"({record['commit'][:7]}, {record['date']}): no record of {kind}"
        )
    got = picked(fresh)

    def close(path: str) -> bool:
        a, b = got.get(path), expected.get(path)
        if _number(a) and _number(b):
            return abs(a - b) <= tolerance.get(path, 0.0)
        return a == b

    paths = list(expected) + [p for p in got if p not in expected]
    return Verdict(reference, [f"{p} {expected.get(p)} -> {got.get(p)}" for p in paths if not close(p)])


def kept_processors(previous: Mapping | None, kind: str, entry: dict) -> tuple[dict, list[str]]:
    """The `processors` of a new record measured on `kind` ({"values", "commit", "date"}, and "times" of a
    measurement that keeps them: `entry`), and the kinds dropped from the `previous` record: those of `kind`'s
    stack unless `kind` reproduced its own previous values; another stack's kinds stay (module docstring)."""
    old = dict((previous or {}).get("processors", {}))
    own = old.pop(kind, None)
    stack = results.stack_of(kind)
    others = {k: v for k, v in old.items() if results.stack_of(k) != stack}
    same = {k: v for k, v in old.items() if results.stack_of(k) == stack}
    if own is not None and own["values"] == json.loads(json.dumps(entry["values"])):
        return {**old, kind: entry}, []
    return {**others, kind: entry}, sorted(same)


@dataclasses.dataclass(frozen=True)
class Regression:
    """A deliberate bug: `old` replaced by `new` in the repository file `path` (exactly one occurrence), which
    the fresh-run checks of `measurements` must catch."""

    what: str
    path: str
    old: str
    new: str
    measurements: tuple[str, ...]


DEMO_GROUP = ("demo", "evaluation", "posttrain")  # they share one demo run
REGRESSIONS = {
    "goldfish_hash": Regression(
        "the Apertus Goldfish hash reads the table one entry off",
        "apertus_jax/data/goldfish/drop_masks.py",
        "keys = _window_products(labels.astype(np.int64), h) % TABLE_SIZE",
        "keys = (_window_products(labels.astype(np.int64), h) + 1) % TABLE_SIZE",
        (*DEMO_GROUP, "goldfish_study", "goldfish_rates"),
    ),
    "learning_rate": Regression(
        "the WSD schedule's stable phase 5% above the peak learning rate",
        "apertus_jax/optim/schedules.py",
        "value = jnp.full_like(x, peak_value)",
        "value = jnp.full_like(x, 1.05 * peak_value)",
        DEMO_GROUP,
    ),
    "loss_mask": Regression(
        "the loss mask drops the label after each EoD instead of the EoD's own",
        "apertus_jax/data/masks.py",
        "loss_mask = ~is_eod",
        "loss_mask = ~np.roll(is_eod, 1, axis=-1)",
        DEMO_GROUP,
    ),
    "batch_sharding": Regression(
        "activations' batch axis no longer sharded over fsdp",
        "apertus_jax/models/partitioning.py",
        '"batch": ("data", "fsdp"),',
        '"batch": ("data",),',
        ("memory_plan", "ablation_memory_plan"),
    ),
    "preset": Regression(
        "the 8B preset's MLP one unit wider",
        "apertus_jax/models/presets.py",
        "mlp_hidden=21504,",
        "mlp_hidden=21505,",
        ("param_counts",),
    ),
    "heldout_split": Regression(
        "1 document in 21 held out instead of 1 in 20",
        "apertus_jax/data/demo_corpus.py",
        "HELDOUT_MODULUS = 20",
        "HELDOUT_MODULUS = 21",
        ("demo_corpus",),
    ),
}


def _patched_tree(root: str, directory: str, regression: Regression | None) -> str:
    """A detached git worktree of ROOT's HEAD at DIRECTORY with `regression` applied (None: as committed).

    Raises:
      ValueError: the regression's `old` text does not occur exactly once (the code moved: update it).
    """
    subprocess.run(["git", "-C", root, "worktree", "add", "-q", "--detach", directory], check=True)
    if regression is not None:
        path = os.path.join(directory, regression.path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if text.count(regression.old) != 1:
            raise ValueError(f"{regression.path}: `{regression.old}` is not there once; update REGRESSIONS")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace(regression.old, regression.new))
    return directory


def _groups(names: list[str]) -> list[list[str]]:
    """NAMES in runs that share a scratch directory: the demo group together (one demo run), others alone."""
    demo = [n for n in names if n in DEMO_GROUP]
    return ([demo] if demo else []) + [[n] for n in names if n not in DEMO_GROUP]


def measure_spread(registry: Mapping, root: str, scratch: str) -> dict:
    """The samples behind the cross-kind tolerances: for each re-checked measurement of `registry`, the
    deterministic values of every processor kind it has a record of, and for those in `PERTURBED` the values
    of fresh runs on this kind under each of `PERTURBATIONS` (XLA_FLAGS set for the commands).

    Returns:
      {measurement: {sample label (a kind, or "KIND under PERTURBATION"): {value name: value}}}.

    Raises:
      ChildProcessError: a command failed.
    """
    kind = results.kind()
    names = [n for n, m in registry.items() if m.rechecked]
    samples = {
        n: {k: r["values"] for k, r in results.read_result(root, n)["processors"].items()} for n in names
    }
    flags = os.environ.get("XLA_FLAGS")
    try:
        for label, perturbation in PERTURBATIONS.items():
            os.environ["XLA_FLAGS"] = perturbation
            for group in _groups([n for n in names if n in PERTURBED]):
                runs = os.path.join(scratch, f"{label}_{group[0]}")
                os.makedirs(runs)
                for name in group:
                    logging.info("processor_spread: %s under %s", name, perturbation)
                    fresh = registry[name].measure(root, runs)
                    samples[name][f"{kind} under {label}"] = {
                        k: fresh[k] for k in registry[name].deterministic
                    }
    finally:
        if flags is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = flags
    return samples


def measure_regressions(registry: Mapping, root: str, scratch: str) -> dict:
    """Runs the fresh-run checks on a copy of HEAD with each of `REGRESSIONS` applied, and on HEAD as it is
    ("none", the control: every re-checked measurement), on this processor kind; each check both ways: exactly
    against this kind's record, and within the spread-based tolerance against the record's quoted values (as on
    a kind without a record of its own).

    Args:
      registry: the measurements by name (`tools.measure.measurements.MEASUREMENTS`).

    Returns:
      {case: {measurement: {"exact": [disagreements], "tolerance": [disagreements]}}}: a regression is caught
      where a list is not empty (a command that fails under a regression, as a fresh-run test would, gives one
      disagreement "failed: ..."); the control's lists are empty when the checks hold.

    Raises:
      ChildProcessError: a command failed on HEAD as committed. ValueError: a regression's code moved, or this kind has no record.
    """
    kind = results.kind()
    spread = results.read_result(root, "processor_spread")["values"]
    control = [n for n, m in registry.items() if m.rechecked]
    cases = {None: control, **{label: r.measurements for label, r in REGRESSIONS.items()}}
    found, trees = {}, []
    try:
        for label, names in cases.items():
            case = label or "none"
            trees.append(os.path.join(scratch, case))
            tree = _patched_tree(root, trees[-1], REGRESSIONS.get(label))
            found[case] = {}
            for group in _groups(list(names)):
                runs = os.path.join(scratch, f"{case}_{group[0]}_runs")
                os.makedirs(runs)
                for name in group:
                    logging.info("check_regressions: %s, %s", case, name)
                    record = results.read_result(root, name)
                    if kind not in record["processors"]:
                        raise ValueError(f"{name} has no record of {kind}: measure --processor_only first")
                    try:
                        fresh = registry[name].measure(tree, runs)
                    except ChildProcessError as error:
                        if label is None:
                            raise
                        # The command's own assertions caught the regression: the check fails both ways.
                        failed = f"failed: {str(error).replace(sys.executable, 'python')}"  # no machine path
                        found[case][name] = dict.fromkeys(("exact", "tolerance"), [failed])
                        continue
                    deterministic, samples = registry[name].deterministic, spread.get(name, {})
                    elsewhere = {**record, "processors": {}}  # as on a kind without a record
                    found[case][name] = {
                        "exact": check(deterministic, fresh, record, kind, samples).disagreements,
                        "tolerance": check(deterministic, fresh, elsewhere, kind, samples).disagreements,
                    }
    finally:
        for tree in trees:
            subprocess.run(["git", "-C", root, "worktree", "remove", "--force", tree], check=False)
    return found


def _figure(value: object) -> str:
    return format(value, ".5g") if _number(value) else str(value)


def render_spread(spread: Mapping) -> str:
    """docs/results.md's table of the fresh-run figures that differ across kinds and perturbations, from the
    `processor_spread` values `spread` ({measurement: {label: values}}): per figure each kind's value, the
    range of the perturbed runs, the spread and the tolerance a kind without a record gets; then the values
    every sample gives alike (compared exactly everywhere; a nested value when all of its figures are)."""
    lines = []
    for name, samples in spread.items():
        kinds = [label for label in samples if " under " not in label]
        perturbed = [label for label in samples if " under " in label]
        by_path = {label: leaves(values) for label, values in samples.items()}
        moved = {path: s for path, s in spreads(samples).items() if s}
        first = next(iter(samples.values()))
        alike = [k for k in first if not any(p == k or p.startswith(f"{k}.") for p in moved)]
        lines.append(f"**{name}** ({len(kinds)} kinds, {len(perturbed)} perturbed runs):")
        if moved:
            header = ["figure", *kinds, "perturbed runs", "spread", "tolerance"]
            lines += ["", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
            for path, width in moved.items():
                runs = [by_path[label][path] for label in perturbed]
                cells = [path, *(_figure(by_path[label][path]) for label in kinds)]
                cells.append(f"{_figure(min(runs))} to {_figure(max(runs))}" if runs else "-")
                cells += [_figure(width), _figure(MARGIN * width)]
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
        lines.append(f"Alike in every sample (exact everywhere): {', '.join(alike) or 'none'}.")
        lines.append("")
    return "\n".join(lines)


def stacks_table(record: Mapping) -> str:
    """A results `record`'s deterministic values of every kind it keeps (`processors`), one column each, and for
    a processor recorded on two stacks the difference of the later stack's values (a Markdown table): what the
    figures of one run are on each stack (docs/results.md, "Across stacks")."""
    kinds = sorted(record.get("processors", {}), key=lambda k: (k.rpartition(results.KIND_STACK)[0], k))
    values = {kind: leaves(record["processors"][kind]["values"]) for kind in kinds}
    pairs = []  # (processor, earlier kind, later kind)
    for kind in kinds:
        processor = kind.rpartition(results.KIND_STACK)[0]
        same = [k for k in kinds if k.rpartition(results.KIND_STACK)[0] == processor and k != kind]
        pairs += [(processor, k, kind) for k in same if k < kind]
    header = [
        "figure",
        *kinds,
        *(f"{results.stack_of(b)} - {results.stack_of(a)} on {p}" for p, a, b in pairs),
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for path in values[kinds[0]] if kinds else ():
        cells = [path, *(_figure(values[kind].get(path)) for kind in kinds)]
        for _, a, b in pairs:
            x, y = values[a].get(path), values[b].get(path)
            cells.append(_figure(y - x) if _number(x) and _number(y) else ("alike" if x == y else "differs"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_regressions(found: Mapping) -> str:
    """docs/results.md's table of the regression demonstration (`measure_regressions`' values `found`): per
    case and measurement, whether the exact rule and the tolerance rule failed, and on how many figures."""

    def verdict(disagreements: list[str]) -> str:
        if not disagreements:
            return "passes"
        first = disagreements[0].split(" ")[0].rstrip(":")
        if first == "failed":
            return "fails (the command fails)"
        return f"fails ({len(disagreements)}: {first}{', ...' if len(disagreements) > 1 else ''})"

    lines = [
        "| case | the bug | measurement | exact rule | tolerance rule |",
        "| --- | --- | --- | --- | --- |",
    ]
    for case, checks in found.items():
        what = REGRESSIONS[case].what if case in REGRESSIONS else "none (HEAD as committed)"
        for name, result in checks.items():
            cells = [case, what, name, verdict(result["exact"]), verdict(result["tolerance"])]
            lines.append("| " + " | ".join(cells) + " |")
            what = ""
    return "\n".join(lines) + "\n"
