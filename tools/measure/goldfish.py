"""The Goldfish figures: the study of repeated sonnets (docs/usage.md), the drop rates on real text
(`benchmarks.data_pipeline --json`), and the two editions of Shakespeare with the canonical hash's cost
(docs/memorization.md).

    values = measure_goldfish_rates(REPO, scratch)
"""

from __future__ import annotations

import json
import os

from tools.measure import commands

GOLDFISH_RUN = "python -m experiments.goldfish_study --out=/tmp/goldfish_study"
GOLDFISH_SCORES = ("rouge_l", "lccs", "exact_matches", "unseen_rouge_l")


def measure_goldfish(root: str, scratch: str) -> dict:
    """The Goldfish-study figures of docs/usage.md: `experiments.goldfish_study` with its defaults, from the
    goldfish_study.json it writes.

    Returns:
      wall_seconds; for RUN of standard, goldfish (the k of the study's defaults): RUN_rouge_l, RUN_lccs
      (tokens), RUN_exact_matches (trained documents whose suffix is reproduced exactly) on the trained
      documents, RUN_unseen_rouge_l on the unseen ones; num_documents, suffix_len (tokens), k.

    Raises:
      ChildProcessError: the command failed.
    """
    wall = commands.documented(GOLDFISH_RUN, root, scratch, {})
    with open(os.path.join(scratch, "goldfish_study", "goldfish_study.json")) as f:
        study = json.load(f)
    config = study["config"]
    values = {"wall_seconds": round(wall, 1), **{k: config[k] for k in ("num_documents", "suffix_len", "k")}}
    for run, name in (("standard", "standard"), (f"goldfish_k{config['k']}", "goldfish")):
        train, unseen = study["runs"][run]["train"], study["runs"][run]["unseen"]
        values.update(
            {
                f"{name}_rouge_l": train["rouge_l"],
                f"{name}_lccs": train["lccs"],
                f"{name}_exact_matches": round(train["exact_match"] * config["num_documents"]),
                f"{name}_unseen_rouge_l": unseen["rouge_l"],
            }
        )
    return values


PIPELINE_RUN = "python -m benchmarks.data_pipeline --json=/tmp/data_pipeline.json"


def measure_goldfish_rates(root: str, scratch: str) -> dict:
    """docs/usage.md's Goldfish drop rates on real text (k = h = 50, tekken, the demo corpus), from the JSON
    `benchmarks.data_pipeline` writes (its throughput is of the machine:
    benchmarks/reports/2026-11-30-data-pipeline.md).

    Returns:
      wall_seconds; apertus_drop_rate, mixed_drop_rate (fractions of the targets at positions >= h - 1,
      4 decimals), zero_product_windows (the fraction of windows whose int64 product is 0, 3 decimals).

    Raises:
      ChildProcessError: the command failed.
    """
    wall = commands.documented(PIPELINE_RUN, root, scratch, {})
    report = commands.written_json(PIPELINE_RUN, scratch)
    return {
        "wall_seconds": round(wall, 1),
        "apertus_drop_rate": round(report["apertus_drop_rate"], 4),
        "zero_product_windows": round(report["zero_product_windows"], 3),
        "mixed_drop_rate": round(report["mixed_drop_rate"], 4),
    }


GOLDFISH_FORMATS_RUN = "python -m experiments.goldfish_formats --out=/tmp/goldfish_formats"
# The canonical hash's cost on the sonnets (`tools.measure.canonical_cost`).
CANONICAL_COST = "python -m tools.measure.canonical_cost"


def measure_goldfish_formats(root: str, scratch: str) -> dict:
    """docs/memorization.md's Gutenberg vs First Folio comparison (`experiments.goldfish_formats` with its
    defaults: all 28 plays, k in 4, 50, h in 4, 13, 50), from the goldfish_formats.json it writes, and the
    canonical hash's cost on the sonnets (`CANONICAL_COST`, the JSON it prints).

    Returns:
      wall_seconds; plays, aligned_words; per hash and setting `<hash>_k<k>_h<h>`: identical, shared_drops,
      token_drop_rate (fractions); shared_ratio_min/max: canonical shared drops over a token hash's ("apertus",
      "mixed") at h = 4 and 13, the least and the most over both k and both token hashes; cost: tokens (the
      sonnets'), us_h13, us_h50 (microseconds per token, 1 decimal as printed), batch_ms (us_h13 x a 16 x 128
      batch, milliseconds).

    Raises:
      ChildProcessError: a command failed. ValueError: the cost command printed no JSON object.
    """
    wall = commands.documented(GOLDFISH_FORMATS_RUN, root, scratch, {})
    with open(os.path.join(scratch, "goldfish_formats", "goldfish_formats.json")) as f:
        report = json.load(f)
    settings = report["results"]
    values = {
        "wall_seconds": round(wall, 1),
        "plays": len(report["plays"]),
        "aligned_words": next(iter(settings.values()))["aligned_words"],
        **{
            f"{r['hash']}_k{r['k']}_h{r['h']}": {
                k: r[k] for k in ("identical", "shared_drops", "token_drop_rate")
            }
            for r in settings.values()
        },
    }
    ratios = [
        values[f"canonical_k{k}_h{h}"]["shared_drops"] / values[f"{token}_k{k}_h{h}"]["shared_drops"]
        for k in (4, 50)
        for h in (4, 13)
        for token in ("apertus", "mixed")
    ]
    values.update(shared_ratio_min=min(ratios), shared_ratio_max=max(ratios))
    cost = commands.printed_json(CANONICAL_COST, root, {})
    values["cost"] = {**cost, "batch_ms": round(cost["us_h13"] * 16 * 128 / 1000)}
    return values
