"""Comparing training runs: loss and in-loop eval metrics vs tokens (PNG) and a markdown table.

    png, table = compare(["/tmp/ablation"], baseline="baseline", out="/tmp/ablation/comparison")

Each path is a run workdir (holding `metrics.jsonl`) or a folder searched for them. Runs are grouped into
variants by name (`apertus_jax.records.runs`: a workdir `seed<N>` belongs to the variant of its parent folder). Curves are the mean over a variant's
seeds. `compare` leaves out unfinished runs (`RunRecords.finished`), naming them in a warning and in the table's
file. Without an `out`, the figure and table go into the folder that holds the runs, never into a run's
workdir (`default_out`). Notebooks use the parts: `apertus_jax.records.runs.load_runs(dirs)`, `summarize(runs, baseline)`, `plot(runs, baseline, path)`,
`markdown_table(rows)`; the command line is `python -m experiments.compare_runs`.

Definitions (per seed, then mean over seeds; "±" is half the range over seeds):
- smoothed loss: trailing mean of the training loss over the last 10% of the run's steps;
- final loss: the smoothed loss at the last step; final eval metrics: the record of the last eval;
- held-out loss: the in-loop eval's held-out loss over all components (nats per token, token-weighted), without
  the unseen-language sets (`eval/unseen_languages/...`);
- tokens to baseline: the first token count at which a variant reaches the baseline's final value, as a
  fraction of the baseline's tokens ("-" if never), read on the held-out loss when every run has in-loop
  evals (interpolated between evals), else on the smoothed training loss for every run;
- token-matched difference: smoothed loss minus the baseline's at the same token count (interpolated);
- tokens/s: the median over training steps.
"""

from __future__ import annotations

import os

import numpy as np
from absl import logging

from apertus_jax import files, plots
from apertus_jax.eval.config import UNSEEN_LANGUAGES
from apertus_jax.records.runs import RunRecords, load_runs


def _variants(runs: list[RunRecords]) -> dict[str, list[RunRecords]]:
    grouped: dict[str, list[RunRecords]] = {}
    for run in runs:
        grouped.setdefault(run.variant, []).append(run)
    return grouped


def _check_baseline(runs: list[RunRecords], baseline: str | None) -> str:
    names = list(_variants(runs))
    baseline = baseline or names[0]
    if baseline not in names:
        raise ValueError(
            f"baseline {baseline!r} is not among the runs' variants {names}; pass --baseline=NAME"
        )
    return baseline


def eval_keys(runs: list[RunRecords]) -> list[str]:
    """The eval metrics shown: held-out losses, bits per byte and per-byte MC accuracies (sorted)."""
    keys = {k for run in runs for r in run.evals for k in r if k.startswith("eval/")}
    shown = [k for k in keys if k.endswith(("/loss", "/bits_per_byte", "/accuracy_per_byte"))]
    return sorted(shown)


def _mean_spread(values: list[float]) -> tuple[float, float]:
    values = [v for v in values if v is not None and np.isfinite(v)]
    if not values:
        return float("nan"), float("nan")
    return float(np.mean(values)), float((max(values) - min(values)) / 2)


def heldout_curve(run: RunRecords) -> tuple[np.ndarray, np.ndarray] | None:
    """(tokens, held-out loss over all components: nats per token, token-weighted) of the run's eval
    records, or None without any. Unseen-language sets (`eval/unseen_languages/...`) are left out: they measure
    transfer to languages never trained on, not learning."""
    points = []
    for r in run.evals:
        names = [
            k[len("eval/") : -len("/loss")]
            for k in r
            if k.startswith("eval/") and k.endswith("/loss") and not k.startswith(f"eval/{UNSEEN_LANGUAGES}/")
        ]
        if names:
            tokens = [r.get(f"eval/{n}/tokens", 1) for n in names]
            nats = sum(r[f"eval/{n}/loss"] * t for n, t in zip(names, tokens))
            points.append((r["tokens"], nats / sum(tokens)))
    if not points:
        return None
    tokens, values = zip(*points)
    return np.asarray(tokens, np.float64), np.asarray(values)


def target_curve(run: RunRecords, heldout: bool) -> tuple[np.ndarray, np.ndarray]:
    """The curve "tokens to the baseline's final loss" is read on: with `heldout` (every run of the table has
    in-loop evals) the mean held-out loss (less noisy than the training loss of single batches), else the
    smoothed training loss."""
    return heldout_curve(run) if heldout else (run.tokens, run.smoothed_loss())


def tokens_to_reach(tokens: np.ndarray, values: np.ndarray, target: float) -> float | None:
    """First token count at which the curve `values(tokens)` reaches `target` or below (linear
    interpolation between points; at the first point if it starts there), or None."""
    below = np.nonzero(values <= target)[0]
    if not len(below):
        return None
    i = int(below[0])
    if i == 0:
        return float(tokens[0])
    t0, t1, v0, v1 = tokens[i - 1], tokens[i], values[i - 1], values[i]
    return float(t0 + (t1 - t0) * (v0 - target) / (v0 - v1))


def summarize(runs: list[RunRecords], baseline: str | None = None) -> list[dict]:
    """One row per variant: seeds, final loss (mean, ±), final eval metrics, tokens to the baseline's final
    loss (fraction of the baseline's tokens), tokens/s.

    Raises:
      ValueError: an unknown baseline.
    """
    baseline = _check_baseline(runs, baseline)
    variants = _variants(runs)
    variants = {baseline: variants.pop(baseline), **variants}  # the baseline's row first
    base_runs = variants[baseline]
    heldout = all(heldout_curve(r) is not None for r in runs)  # one kind of curve for every run
    target = float(np.mean([target_curve(r, heldout)[1][-1] for r in base_runs]))  # final value, seed mean
    base_tokens = float(np.mean([target_curve(r, heldout)[0][-1] for r in base_runs]))
    keys = eval_keys(runs)
    rows = []
    for name, members in variants.items():
        row = {"variant": name, "seeds": len(members)}
        row["final_loss"], row["final_loss_spread"] = _mean_spread([r.smoothed_loss()[-1] for r in members])
        for key in keys:
            row[key], row[key + " spread"] = _mean_spread(
                [r.evals[-1].get(key) if r.evals else None for r in members]
            )
        curves = [heldout_curve(r) for r in members]
        if all(c is not None for c in curves):
            row["heldout_loss"], row["heldout_loss_spread"] = _mean_spread([c[1][-1] for c in curves])
        # on the mean curve over seeds (as the baseline's final value is a mean over its seeds)
        grid = target_curve(members[0], heldout)[0]
        mean_curve = np.mean([np.interp(grid, *target_curve(r, heldout)) for r in members], axis=0)
        reached = tokens_to_reach(grid, mean_curve, target)
        row["tokens_to_baseline"] = None if reached is None else reached / base_tokens
        row["tokens_per_s"] = float(
            np.mean([np.median([t["tokens_per_s"] for t in r.train]) for r in members])
        )
        row["tokens"] = float(np.mean([r.tokens[-1] for r in members]))
        rows.append(row)
    return rows


def markdown_table(rows: list[dict]) -> str:
    """The rows of `summarize` as a markdown table (loss in nats/token, bits per byte, accuracy in %)."""
    keys = [k for k in rows[0] if k.startswith("eval/") and not k.endswith(" spread")]
    heldout = all("heldout_loss" in row for row in rows)
    header = ["variant", "seeds", "final train loss", *(["held-out loss"] if heldout else [])]
    header += [k[len("eval/") :] for k in keys]
    header += ["tokens to baseline's final loss", "tokens/s"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in rows:
        cells = [
            row["variant"],
            str(row["seeds"]),
            f"{row['final_loss']:.4f} ± {row['final_loss_spread']:.4f}",
        ]
        if heldout:
            cells.append(f"{row['heldout_loss']:.4f} ± {row['heldout_loss_spread']:.4f}")
        for key in keys:
            scale, digits = (100, 1) if "accuracy" in key else (1, 4)
            cells.append(f"{scale * row[key]:.{digits}f} ± {scale * row[key + ' spread']:.{digits}f}")
        reach = row["tokens_to_baseline"]
        cells.append("-" if reach is None else f"{100 * reach:.0f}%")
        cells.append(f"{row['tokens_per_s']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _mean_curve(members: list[RunRecords], grid: np.ndarray, values) -> np.ndarray:
    return np.stack([np.interp(grid, r.tokens, values(r)) for r in members])


def plot(runs: list[RunRecords], baseline: str | None, path: str) -> None:
    """Smoothed training loss vs tokens, its token-matched difference to the baseline, and each eval metric
    vs tokens (mean over seeds; the band is the range over seeds); written to `path` (PNG) atomically."""
    baseline = _check_baseline(runs, baseline)
    variants = _variants(runs)
    keys = eval_keys(runs)
    panels = 2 + len(keys)
    columns = min(panels, 3)
    fig = plots.figure((5 * columns, 3.6 * -(-panels // columns)))
    axes = fig.subplots(-(-panels // columns), columns, squeeze=False).ravel()
    base_members = variants[baseline]
    grid = base_members[0].tokens
    base_curve = _mean_curve(base_members, grid, RunRecords.smoothed_loss).mean(0)
    # One color per variant: the default cycle repeats after 10.
    colors = plots.colormap("tab20" if len(variants) > 10 else "tab10").colors
    for index, (name, members) in enumerate(variants.items()):
        curves = _mean_curve(members, grid, RunRecords.smoothed_loss)
        (line,) = axes[0].plot(
            grid, curves.mean(0), color=colors[index % len(colors)], label=f"{name} ({len(members)} seeds)"
        )
        axes[0].fill_between(grid, curves.min(0), curves.max(0), color=line.get_color(), alpha=0.2)
        difference = curves - base_curve
        axes[1].plot(grid, difference.mean(0), color=line.get_color())
        axes[1].fill_between(grid, difference.min(0), difference.max(0), color=line.get_color(), alpha=0.2)
        for ax, key in zip(axes[2:], keys):
            points = [
                (
                    np.asarray([e["tokens"] for e in r.evals if key in e]),
                    [e[key] for e in r.evals if key in e],
                )
                for r in members
            ]
            points = [(t, v) for t, v in points if len(t)]
            if points:
                length = min(len(t) for t, _ in points)
                values = np.asarray([v[:length] for _, v in points])
                ax.plot(points[0][0][:length], values.mean(0), marker="o", color=line.get_color())
    axes[0].set_ylabel("training loss, smoothed (nats/token)")
    axes[0].legend(fontsize=8)
    axes[1].axhline(0, color="black", lw=0.8)
    axes[1].set_ylabel(f"loss - {baseline} at equal tokens (nats)")
    for ax, key in zip(axes[2:], keys):
        unit = "fraction correct" if "accuracy" in key else ("bits/byte" if "bits" in key else "nats/token")
        ax.set_ylabel(f"{key[len('eval/') :]} ({unit})")
    for ax in axes[:panels]:
        ax.set_xlabel("training tokens")
        ax.grid(alpha=0.3)
    for ax in axes[panels:]:
        ax.axis("off")
    plots.save(fig, path, dpi=100)


def default_out(run_paths: list[str]) -> str:
    """Where a comparison of the workdirs `run_paths` goes without an `out`: `comparison` in the deepest folder
    that holds them all and is no run's workdir (runs given one by one: beside them; an ablation folder: in it)."""
    folder = os.path.commonpath([os.path.abspath(path) for path in run_paths])
    while os.path.isfile(os.path.join(folder, "metrics.jsonl")):  # a run's workdir: go up beside it
        folder = os.path.dirname(folder)
    return os.path.join(folder, "comparison")


def compare(paths: list[str], baseline: str | None = None, out: str | None = None) -> tuple[str, str]:
    """Loads the finished runs under `paths`, writes `out`.png and `out`.md (default: `default_out` of the
    runs); returns their paths. Unfinished runs are left out, named in a logged warning and in `out`.md.

    Raises:
      FileNotFoundError: a path without runs; ValueError: no finished run, or an unknown baseline.
    """
    runs = load_runs(paths)
    out = out or default_out([r.path for r in runs])
    unfinished = ", ".join(
        f"{r.path} (step {r.train[-1]['step'] if r.train else 0} of {r.planned_steps or '?'})"
        for r in runs
        if not r.finished
    )
    runs = [r for r in runs if r.finished]
    if not runs:
        raise ValueError(f"no run under {' '.join(paths)} is finished ({unfinished}): finish one to compare")
    baseline = _check_baseline(runs, baseline)
    table = markdown_table(summarize(runs, baseline))
    note = ""
    if unfinished:
        note = f"Left out, unfinished: {unfinished}.\n\n"
        logging.warning("left out of the comparison, unfinished: %s; finish them to compare them", unfinished)
    plot(runs, baseline, out + ".png")
    files.write_text(out + ".md", f"Baseline: `{baseline}`.\n\n{note}" + table)
    return out + ".png", out + ".md"
