"""The memorization studies of docs/memorization.md: `experiments.memorization` at CPU scale and with one
text in two formats, from the memorization.json each writes and the runs' workdirs.

    values = measure_memorization(REPO, scratch)
"""

from __future__ import annotations

import json
import os
import statistics

from apertus_jax.data.run_tokenizer import run_tokenizer
from tools.measure import commands

# docs/memorization.md: the memorization study at CPU scale (configs/studies/memorization_tiny.py), the same
# study with one text in two formats (configs/studies/memorization_formats.py, token hash then canonical hash),
# and the Goldfish drop agreement between two editions of Shakespeare's plays with the canonical hash's cost.
MEMORIZATION_RUN = (
    "python -m experiments.memorization --config=configs/studies/memorization_tiny.py --out=/tmp/memorization"
)
MEMORIZATION_FIGURES = (
    "heatmap_standard_greedy.png",
    "heatmap_standard_nucleus.png",
    "heatmap_goldfish_k4_greedy.png",
    "heatmap_goldfish_k4_nucleus.png",
    "canary_exposure.png",
)
FORMATS_RUNS = (
    "python -m experiments.memorization --config=configs/studies/memorization_formats.py --out=/tmp/formats",
    "python -m experiments.memorization --config=configs/studies/memorization_formats.py --out=/tmp/formats "
    "--config.goldfish.hash=canonical",
)


def _study_report(out: str) -> dict:
    """The memorization.json a study command wrote into OUT."""
    with open(os.path.join(out, "memorization.json")) as f:
        return json.load(f)


def injected_percent(workdir: str, config: dict) -> float:
    """The injected documents' share of a study run's training tokens (%, 1 decimal): the tokens of every
    occurrence its probe manifest counts (with BoD and EoD) over steps x tokens per step (`config`: the run
    config of a memorization.json)."""
    tokenizer = run_tokenizer(config["data"]["tokenizer"], config["data"]["demo_tokenizer_vocab"])
    with open(os.path.join(workdir, "probes.json")) as f:
        manifest = json.load(f)
    injected = sum(
        d["exposures"] * len(tokenizer.encode_document(d["text"]))
        for component in manifest["components"].values()
        for d in component["documents"]
    )
    return round(100 * injected / (config["train"]["steps"] * config["train"]["batch_plan"][0][1]), 1)


def study_run_values(run: dict, workdir: str, num_candidates: int) -> dict:
    """The values of one run of a memorization study report (`apertus_jax.studies.memorization.study.run_study`) and
    its WORKDIR.

    Returns:
      final_loss, step; per decoding (greedy, nucleus), per repetition count `r<n>` (r0: never seen): per
      prefix length `p<n>` the means over probes and offsets rouge_l, exact (exact-match length, tokens), ttr;
      the row's rouge_l_min/max, exact_min/max over its prefix lengths and single_rouge_l_min/max over its
      single probe x offset x prefix scores; the decoding's ttr_min/max/mean over all cells; `canaries`, per
      repetition count `r<n>`: exposure mean/min/max (bits) and best_rank/worst_rank among num_candidates + 1.
    """
    values = {"final_loss": commands.step_records(workdir)[-1]["loss"], "step": run["step"]}
    for decoding, means in run["means"].items():
        table, ttrs = {}, []
        for reps, row in means["rouge_l"].items():
            cells = {
                f"p{p}": {
                    "rouge_l": means["rouge_l"][reps][p],
                    "exact": means["exact_match_length"][reps][p],
                    "ttr": means["ttr"][reps][p],
                }
                for p in row
            }
            ttrs += [c["ttr"] for c in cells.values()]
            singles = [
                r["rouge_l"]
                for r in run["records"]
                if r["decoding"] == decoding and r["repetitions"] == int(reps)
            ]
            table[f"r{reps}"] = {
                **cells,
                **{
                    f"{metric}_{name}": fn(c[metric] for c in cells.values())
                    for metric in ("rouge_l", "exact")
                    for name, fn in (("min", min), ("max", max))
                },
                "single_rouge_l_min": min(singles),
                "single_rouge_l_max": max(singles),
            }
        values[decoding] = {
            **table,
            "ttr_min": min(ttrs),
            "ttr_max": max(ttrs),
            "ttr_mean": statistics.mean(ttrs),
        }
    by_count: dict = {}
    for canary in run["canaries"]:
        by_count.setdefault(canary["repetitions"], []).append(canary["exposure"])
    values["canaries"] = {
        f"r{count}": {
            "mean": statistics.mean(bits),
            "min": min(bits),
            "max": max(bits),
            # exposure = log2(n + 1) - log2(rank)
            "best_rank": round((num_candidates + 1) * 2.0 ** -max(bits)),
            "worst_rank": round((num_candidates + 1) * 2.0 ** -min(bits)),
        }
        for count, bits in sorted(by_count.items())
    }
    return values


def measure_memorization(root: str, scratch: str) -> dict:
    """docs/memorization.md's CPU run: `experiments.memorization` with configs/studies/memorization_tiny.py
    (the standard and the Goldfish run, the resume check), from the memorization.json it writes and the runs'
    workdirs; copies its heatmaps and canary plot to docs/figures/memorization_<name>.png.

    Returns:
      wall_seconds, train_seconds (the three trainings), score_seconds (generation, scoring, canary ranking);
      injected_percent (probes and canaries, % of the training tokens); per run (standard, goldfish_k4) the
      values of `study_run_values`; resume: preempted_at_step, final_step, exposures ("identical" |
      "different": the resumed run's probe and canary exposure counts against the uninterrupted run's),
      metrics_steps ("1-<last>" when its metrics.jsonl steps are 1, 2, ..., else "not contiguous"),
      short_documents (the injected documents of the standard run that saw fewer occurrences than planned).

    Raises:
      ChildProcessError: the command failed.
    """
    wall = commands.documented(MEMORIZATION_RUN, root, scratch, {})
    out = os.path.join(scratch, "memorization")
    report = _study_report(out)
    for name in MEMORIZATION_FIGURES:
        commands.figure(os.path.join(out, name), root, f"memorization_{name}")
    candidates = report["config"]["num_candidates"]
    check = report["resume_check"]
    with open(os.path.join(out, "standard", "probes.json")) as f:
        manifest = json.load(f)
    final_step = commands.step_records(os.path.join(out, "standard_resumed"))[-1]["step"]
    return {
        "wall_seconds": round(wall, 1),
        "train_seconds": round(report["train_seconds"], 1),
        "score_seconds": round(report["seconds"] - report["train_seconds"], 1),
        "injected_percent": injected_percent(os.path.join(out, "standard"), report["config"]["run"]),
        **{
            name: study_run_values(run, os.path.join(out, name), candidates)
            for name, run in report["runs"].items()
        },
        "resume": {
            "preempted_at_step": check["preempted_at_step"],
            "final_step": final_step,
            "exposures": "identical" if check["identical"] else "different",
            "metrics_steps": (f"1-{final_step}" if check["metrics_steps_contiguous"] else "not contiguous"),
            "short_documents": sum(
                d["exposures"] < d["repetitions"]
                for c in manifest["components"].values()
                for d in c["documents"]
            ),
        },
    }


def measure_memorization_formats(root: str, scratch: str) -> dict:
    """docs/memorization.md's one text in two formats: the two `experiments.memorization` commands with
    configs/studies/memorization_formats.py (the token-hash Goldfish run, then the canonical one; the second
    reuses the standard run), from the memorization.json each writes.

    Returns:
      token_hash_seconds, canonical_seconds (the two commands' wall times); injected_percent (both probe
      formats and the canaries, % of the training tokens); per run (standard, goldfish_k4,
      goldfish_k4_canonical) the values of `study_run_values`.

    Raises:
      ChildProcessError: a command failed.
    """
    out = os.path.join(scratch, "formats")
    values = {"token_hash_seconds": round(commands.documented(FORMATS_RUNS[0], root, scratch, {}), 1)}
    runs = dict(_study_report(out)["runs"])
    values["canonical_seconds"] = round(commands.documented(FORMATS_RUNS[1], root, scratch, {}), 1)
    report = _study_report(out)
    runs.update(report["runs"])
    candidates = report["config"]["num_candidates"]
    values["injected_percent"] = injected_percent(os.path.join(out, "standard"), report["config"]["run"])
    values.update(
        {name: study_run_values(run, os.path.join(out, name), candidates) for name, run in runs.items()}
    )
    return values
