"""datatrove steps on hand-made documents: removals, reasons, per-agent and per-language counters."""

import json

import numpy as np
import pytest
from datatrove.data import Document

from apertus_jax.prep import steps
from apertus_jax.prep.filters import toxicity


def _doc(i, text="Die Würde des Menschen ist unantastbar.", **meta):
    return Document(text=text, id=f"d{i}", metadata={"lang": "de", "token_count": 10, **meta})


def _run(step, docs):
    kept = list(step.run(iter(docs)))
    return kept, {
        k: (v["total"] if isinstance(v, dict) else v) for k, v in step.stats.stats.to_dict().items()
    }


def test_pii_step_skips_code_and_math(tmp_path):
    text = "Mail an anna@beispiel.de, Server 10.0.0.1"
    docs = [_doc(0, text, source="web"), _doc(1, text, source="code"), _doc(2, text, source="math")]
    kept, stats = _run(steps.AnonymizePII(), docs)
    assert [d.text for d in kept] == ["Mail an <email-pii>, Server <ip-pii>", text, text]
    assert stats["docs_skipped"] == 2 and stats["pii/email"] == 1 and stats["pii/ip"] == 1
    assert stats["docs_in"] == 3 and "docs_removed" not in stats


@pytest.fixture
def snapshot(tmp_path):
    path = tmp_path / "robots.jsonl"
    rows = [
        {"domain": "blocked.example", "robots_txt": "User-agent: GPTBot\nUser-agent: CCBot\nDisallow: /\n"},
        {"domain": "news.example", "robots_txt": "User-agent: ClaudeBot\nDisallow: /archiv/\n"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize("mode,kept_ids", [("domain", ["d1", "d2", "d3"]), ("url", ["d1", "d3"])])
def test_robots_step_modes_and_per_agent_counts(snapshot, mode, kept_ids):
    docs = [
        _doc(0, url="https://www.blocked.example/a"),
        _doc(1, url="https://news.example/heute"),
        _doc(2, url="https://news.example/archiv/2019/x", lang="fr"),
        _doc(3),
    ]
    kept, stats = _run(steps.RobotsFilter(snapshot, mode), docs)
    assert [d.id for d in kept] == kept_ids
    assert stats["agent/GPTBot/docs"] == stats["agent/CCBot/docs"] == 1 and stats["agent/GPTBot/tokens"] == 10
    assert stats.get("agent/ClaudeBot/docs", 0) == (1 if mode == "url" else 0)
    assert stats["no_url"] == 1 and stats["reason/robots_opt_out/docs"] == 4 - len(kept_ids)
    assert stats.get("lang/fr/docs_removed", 0) == (1 if mode == "url" else 0)


def test_decontaminate_step_writes_flagged_pairs(tmp_path):
    bench = tmp_path / "bench.jsonl"
    prompt = (
        "Wie verändert sich die Kapazität eines Plattenkondensators, wenn eine Eisenplatte eingeschoben wird?"
    )
    bench.write_text(json.dumps({"id": "q1", "prompt": prompt}, ensure_ascii=False) + "\n")
    docs = [_doc(0, f"User: {prompt}\nAssistant: Sie wird null."), _doc(1)]
    kept, stats = _run(steps.Decontaminate(str(bench), str(tmp_path / "report")), docs)
    assert [d.id for d in kept] == ["d1"] and stats["reason/benchmark_contamination/docs"] == 1
    assert [p.name for p in (tmp_path / "report").iterdir()] == ["00000.jsonl"]
    pairs = [json.loads(line) for line in (tmp_path / "report" / "00000.jsonl").read_text().splitlines()]
    assert [(p["doc_id"], p["prompt_id"]) for p in pairs] == [("d0", "q1")]
    assert pairs[0]["overlap"] == pairs[0]["prompt_tokens"]
    bench.write_text(json.dumps({"id": "q1", "question": prompt}) + "\n")
    with pytest.raises(ValueError, match="item 0 has no string 'prompt'; set decontam.prompt_key"):
        steps.Decontaminate(str(bench), str(tmp_path / "report"))
    with pytest.raises(FileNotFoundError, match="benchmark prompts"):
        steps.Decontaminate(str(tmp_path / "none.jsonl"), str(tmp_path / "report"))


def test_thresholds_step_writes_the_whole_file(tmp_path):
    scored = tmp_path / "scored"
    scored.mkdir()
    scores = {"de": [0.1 * i for i in range(40)], "sw": [0.5, 0.9]}
    with open(scored / "00000.jsonl", "w") as f:
        for lang, values in scores.items():
            for i, score in enumerate(values):
                meta = {"lang": lang, "score_toxicity": score}
                f.write(json.dumps({"text": "t", "id": f"{lang}{i}", "metadata": meta}) + "\n")
    output = tmp_path / "out" / "thresholds.json"
    assert list(steps.ComputeToxicityThresholds(str(scored), str(output), top_fraction=0.1).run()) == []
    expected = {
        "top_fraction": 0.1,
        "thresholds": toxicity.language_thresholds(scores, 0.1),
        "documents": {"de": 40, "sw": 2},
    }
    assert output.read_text() == json.dumps(expected, indent=1, sort_keys=True)  # no trailing newline
    assert [p.name for p in output.parent.iterdir()] == ["thresholds.json"]


def test_toxicity_and_tier_steps(tmp_path):
    thresholds = tmp_path / "t.json"
    thresholds.write_text(json.dumps({"thresholds": {"de": 0.8}}))
    tiers = {"coherence": 0.5, "information_value": 0.5, "educational_quality": 2.0}
    docs = [
        _doc(0, score_toxicity=0.9),
        _doc(
            1,
            score_toxicity=0.1,
            score_coherence=0.9,
            score_information_value=0.9,
            score_educational_quality=2.5,
        ),
        _doc(
            2,
            score_toxicity=0.3,
            score_coherence=0.9,
            score_information_value=0.1,
            score_educational_quality=2.5,
        ),
        _doc(3, lang="sw", score_toxicity=0.99),
    ]
    kept, stats = _run(steps.ToxicityFilter(str(thresholds)), docs)
    assert [d.id for d in kept] == ["d1", "d2", "d3"] and stats["reason/toxicity_top_fraction/docs"] == 1
    kept, stats = _run(steps.QualityTiers(tiers, keep="dense_core"), kept)
    assert [d.id for d in kept] == ["d1"] and kept[0].metadata["tiers"] == [
        "coherence",
        "information_value",
        "educational_quality",
        "dense_core",
    ]
    assert (
        stats["tier/scored/docs"] == 2
        and stats["tier/coherence/docs"] == 2
        and stats["tier/dense_core/docs"] == 1
    )
    assert stats["reason/not_dense_core/docs"] == 2
    with pytest.raises(ValueError, match="keep"):
        steps.QualityTiers(tiers, keep="gold")
    with pytest.raises(ValueError, match="missing"):
        steps.QualityTiers({"coherence": 0.5})


def test_score_step_matches_classifier_and_respects_languages_and_sources(small_inputs):
    from apertus_jax.prep.filters.classifier import Classifier

    heads = {
        "toxicity": {"path": small_inputs["heads"]["toxicity"], "languages": ["de"]},
        "coherence": {"path": small_inputs["heads"]["coherence"], "languages": None},
    }
    texts = [d["text"] for d in small_inputs["docs"][-12:]]
    docs = [
        _doc(i, t, source="code" if i == 0 else "web", lang="fr" if i == 1 else "de")
        for i, t in enumerate(texts)
    ]
    kept, stats = _run(steps.ScoreDocuments(heads, batch_size=5), docs)
    assert len(kept) == 12 and stats["scored/toxicity"] == 10 and stats["scored/coherence"] == 11
    assert "score_toxicity" not in kept[1].metadata and "score_coherence" in kept[1].metadata
    assert not any(k.startswith("score_") for k in kept[0].metadata)
    expected = Classifier.load(heads["toxicity"]["path"]).score(texts[2:])
    np.testing.assert_allclose([d.metadata["score_toxicity"] for d in kept[2:]], expected, rtol=1e-5)
