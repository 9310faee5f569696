"""Boldt subsets of the demo corpus: the rule-based scores and the tiers they give."""

import json

import pytest

from apertus_jax.prep.demo import boldt as boldt_demo


def test_rule_based_scores():
    poem = "Der Mond ist aufgegangen\ndie goldnen Sternlein prangen\nam Himmel hell und klar"
    handbook = (
        "Debian ist ein Betriebssystem. Es besteht aus freier Software.\nPakete werden mit APT verwaltet."
    )
    assert boldt_demo.score_document(poem, "fortunes-de")["coherence"] == 0
    scores = boldt_demo.score_document(handbook, "debian-handbook")
    assert scores == {"coherence": 1.0, "information_value": 1.0, "educational_quality": 3 + 14 / 1000}


@pytest.mark.slow
def test_subsets_are_nested_tiers_of_the_train_split(tmp_path):
    paths = boldt_demo.write_demo_subsets(str(tmp_path))
    rows = {}
    for name, path in paths.items():
        with open(path, encoding="utf-8") as f:
            rows[name] = [json.loads(line) for line in f]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{name}.jsonl" for name in sorted(paths)]
    text = (tmp_path / "pool.jsonl").read_text(encoding="utf-8")
    assert text == "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows["pool"]) and "ü" in text
    ids = {name: {r["id"] for r in subset} for name, subset in rows.items()}
    assert ids["dense_core"] < ids["coherence"] < ids["pool"] and not ids["heldout"] & ids["pool"]
    assert all(r["coherence"] >= 0.5 for r in rows["coherence"])
    assert all(r["educational_quality"] >= 2 and r["information_value"] == 1 for r in rows["dense_core"])
    assert 100 < len(rows["dense_core"]) < len(rows["coherence"]) < len(rows["pool"])
