"""The report: datatrove stats files summed over tasks, reduced to steps, reasons, agents, tiers."""

import json

from apertus_jax.prep.stats import build_report, format_report, tier_rows


def _write_stats(work_dir, stage, rank, steps):
    path = work_dir / "logs" / stage / "stats" / f"{rank:05d}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            [
                {"name": name, "time_stats": {"total": seconds}, "stats": counters}
                for name, seconds, counters in steps
            ]
        )
    )


def test_report_sums_tasks(tmp_path):
    for rank, (docs, removed) in enumerate([(100, 10), (50, 5)]):
        _write_stats(
            tmp_path,
            "filter",
            rank,
            [
                (
                    "apertus-prep: robots.txt",
                    2.0 + rank,
                    {
                        "docs_in": docs,
                        "tokens_in": 10 * docs,
                        "docs_removed": removed,
                        "tokens_removed": 10 * removed,
                        "reason/robots_opt_out/docs": removed,
                        "reason/robots_opt_out/tokens": 10 * removed,
                        "lang/de/docs_in": docs,
                        "lang/de/docs_removed": removed,
                        "agent/GPTBot/docs": removed,
                        "agent/GPTBot/tokens": 10 * removed,
                    },
                )
            ],
        )
    _write_stats(
        tmp_path,
        "select",
        0,
        [
            (
                "apertus-prep: quality tiers",
                1.0,
                {
                    "docs_in": 135,
                    "tier/scored/docs": 100,
                    "tier/coherence/docs": 60,
                    "tier/coherence/tokens": 6000,
                    "tier/dense_core/docs": 5,
                    "tier/dense_core/tokens": 1000,
                },
            )
        ],
    )
    report = build_report(str(tmp_path))
    step = report["stages"]["filter"][0]
    assert (step["docs_in"], step["docs_removed"], step["tokens_removed"]) == (150, 15, 150)
    assert (step["docs_kept"], step["tokens_kept"]) == (135, 1350)
    assert step["seconds"] == 5.0 and step["docs_per_second_per_worker"] == 30.0
    assert step["removed_by_reason"] == {"robots_opt_out": {"docs": 15, "tokens": 150}}
    assert step["by_language"]["de"] == {"docs_in": 150, "docs_removed": 15}
    assert report["robots_by_agent"] == {"GPTBot": {"docs": 15, "tokens": 150}}
    tiers = {row["subset"]: row for row in report["tiers"]}
    assert tiers["coherence"]["yield_percent"] == 60.0 and tiers["dense_core"]["mean_doc_tokens"] == 200.0
    table = format_report(report)
    assert "robots_opt_out" in table and "GPTBot" in table and "dense_core" in table


def test_tier_rows_without_scores():
    assert all(row["yield_percent"] == 0.0 for row in tier_rows({}))
