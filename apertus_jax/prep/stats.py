"""Statistics report of a preparation run, from datatrove's per-task stats files.

Reads `<work_dir>/logs/<stage>/stats/<rank>.json` (written by every executor: local, Slurm, Ray), sums them
over tasks with datatrove's `PipelineStats`, and reduces the counters of `apertus_jax.prep.steps` to:
per step documents and tokens in/removed, removals by reason and by language, step-specific counters,
seconds and documents per second per worker; per agent robots.txt removals; Boldt-style tier yields.
"""

import glob
import json
import os

from datatrove.utils.stats import PipelineStats

from apertus_jax.prep.executors import STAGES
from apertus_jax.prep.filters import quality


def _total(value) -> float:
    return value["total"] if isinstance(value, dict) else float(value)


def load_stage_stats(work_dir: str, stage: str) -> PipelineStats | None:
    """Sum of a stage's per-task stats files, or None if the stage has none (not run or disabled)."""
    files = sorted(glob.glob(os.path.join(work_dir, "logs", stage, "stats", "*.json")))
    if not files:
        return None
    merged = PipelineStats()
    for path in files:
        with open(path) as f:
            merged += PipelineStats.from_json(json.load(f))
    return merged


def _step_report(stat) -> dict:
    counters = stat.stats
    values = {key: _total(value) for key, value in counters.to_dict().items()}
    # datatrove's own readers count `documents`, its writers `total`; the prep steps count `docs_in`.
    docs_in = values.get("docs_in", values.get("documents", values.get("total", 0.0)))
    seconds = stat.time_stats.total
    report = {
        "step": stat.name,
        "docs_in": int(docs_in),
        "docs_removed": int(values.get("docs_removed", 0)),
        "tokens_in": int(values.get("tokens_in", 0)),
        "tokens_removed": int(values.get("tokens_removed", 0)),
        "docs_kept": int(docs_in - values.get("docs_removed", 0)),
        "tokens_kept": int(values.get("tokens_in", 0) - values.get("tokens_removed", 0)),
        "seconds": seconds,
        "docs_per_second_per_worker": docs_in / seconds if seconds > 0 else None,
        "removed_by_reason": {},
        "removed_by_reason_and_language": {},
        "by_language": {},
        "counters": {},
    }
    for key, value in sorted(values.items()):
        parts = key.split("/")
        if parts[0] == "reason" and len(parts) == 3:
            report["removed_by_reason"].setdefault(parts[1], {})[parts[2]] = int(value)
        elif parts[0] == "reason" and len(parts) == 4 and parts[2] == "lang":
            report["removed_by_reason_and_language"].setdefault(parts[1], {})[parts[3]] = int(value)
        elif parts[0] == "lang" and len(parts) == 3:
            report["by_language"].setdefault(parts[1], {})[parts[2]] = int(value)
        elif key not in report and key not in ("total", "forwarded", "dropped", "doc_len", "doc_len_tokens"):
            report["counters"][key] = value
    return report


def tier_rows(counters: dict) -> list[dict]:
    """Boldt Table 1 style rows from the quality step's counters (yield = % of scored documents)."""
    scored = counters.get("tier/scored/docs", 0)
    rows = []
    for subset in quality.SUBSETS:
        docs, tokens = counters.get(f"tier/{subset}/docs", 0), counters.get(f"tier/{subset}/tokens", 0)
        rows.append(
            {
                "subset": subset,
                "documents": int(docs),
                "tokens": int(tokens),
                "yield_percent": 100.0 * docs / scored if scored else 0.0,
                "mean_doc_tokens": tokens / docs if docs else 0.0,
            }
        )
    return rows


def build_report(work_dir: str) -> dict:
    """The run's report: `{"stages": {stage: [step reports]}, "removed": {...}, "robots_by_agent": {...},
    "tiers": [...]}`; `removed` sums every step's removals per reason: `{reason: {"docs", "tokens",
    "by_language": {lang: docs}}}` (dedup, robots.txt opt-outs, contamination, toxicity, tier selection)."""
    report = {"stages": {}, "removed": {}, "robots_by_agent": {}, "tiers": []}
    for stage in STAGES:
        stats = load_stage_stats(work_dir, stage)
        if stats is None:
            continue
        report["stages"][stage] = [_step_report(stat) for stat in stats.stats]
        for step in report["stages"][stage]:
            for reason, counts in step["removed_by_reason"].items():
                total = report["removed"].setdefault(reason, {"docs": 0, "tokens": 0, "by_language": {}})
                total["docs"] += counts.get("docs", 0)
                total["tokens"] += counts.get("tokens", 0)
                for lang, docs in step["removed_by_reason_and_language"].get(reason, {}).items():
                    total["by_language"][lang] = total["by_language"].get(lang, 0) + docs
            for key, value in step["counters"].items():
                parts = key.split("/")
                if parts[0] == "agent":
                    report["robots_by_agent"].setdefault(parts[1], {})[parts[2]] = int(value)
            if any(key.startswith("tier/") for key in step["counters"]):
                report["tiers"] = tier_rows(step["counters"])
    return report


def format_report(report: dict, top_languages: int = 8) -> str:
    """Plain-text tables: steps, removals by reason, robots.txt per agent, tier yields, top languages."""
    lines = [
        f"{'stage':<10} {'step':<42} {'docs in':>9} {'removed':>8} {'tokens in':>11} {'removed':>10} "
        f"{'docs/s/worker':>13}"
    ]
    by_language = {}
    for stage, step_reports in report["stages"].items():
        for step in step_reports:
            rate = step["docs_per_second_per_worker"]
            lines.append(
                f"{stage:<10} {step['step'][:42]:<42} {step['docs_in']:>9,} {step['docs_removed']:>8,} "
                f"{step['tokens_in']:>11,} {step['tokens_removed']:>10,} "
                f"{(f'{rate:,.0f}' if rate else '-'):>13}"
            )
            for reason, counts in step["removed_by_reason"].items():
                lines.append(
                    f"{'':<10}   removed: {reason:<31} {counts.get('docs', 0):>18,} "
                    f"{counts.get('tokens', 0):>22,}"
                )
            extra = {
                k: v
                for k, v in step["counters"].items()
                if k.split("/")[0] in ("pii", "flagged_pairs", "docs_skipped", "no_url")
            }
            if extra:
                lines.append(f"{'':<10}   " + ", ".join(f"{k}={int(v):,}" for k, v in extra.items()))
            for lang, counts in step["by_language"].items():
                entry = by_language.setdefault(lang, {"docs_in": 0, "docs_removed": 0, "tokens_removed": 0})
                if stage == "filter" and step["step"].endswith("count tokens"):
                    entry["docs_in"] = counts.get("docs_in", 0)
                entry["docs_removed"] += counts.get("docs_removed", 0)
                entry["tokens_removed"] += counts.get("tokens_removed", 0)
    if report["robots_by_agent"]:
        lines += ["", f"{'robots.txt agent':<30} {'docs removed':>12} {'tokens removed':>15}"]
        for agent, counts in sorted(report["robots_by_agent"].items()):
            lines.append(f"{agent:<30} {counts.get('docs', 0):>12,} {counts.get('tokens', 0):>15,}")
    if report["tiers"]:
        lines += ["", f"{'Boldt subset':<22} {'docs':>8} {'yield %':>8} {'tokens':>11} {'tokens/doc':>10}"]
        for row in report["tiers"]:
            lines.append(
                f"{row['subset']:<22} {row['documents']:>8,} {row['yield_percent']:>8.1f} "
                f"{row['tokens']:>11,} {row['mean_doc_tokens']:>10.0f}"
            )
    if by_language:
        lines += ["", f"{'language':<12} {'docs in':>9} {'docs removed':>12} {'tokens removed':>15}"]
        for lang, counts in sorted(by_language.items(), key=lambda kv: -kv[1]["docs_in"])[:top_languages]:
            lines.append(
                f"{lang:<12} {counts['docs_in']:>9,} {counts['docs_removed']:>12,} "
                f"{counts['tokens_removed']:>15,}"
            )
    return "\n".join(lines)
