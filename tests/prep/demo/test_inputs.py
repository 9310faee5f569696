"""Demo inputs of the preparation pipeline: documents with hosts, the robots.txt policies, proxy labels."""

import collections
import json

import pytest

from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.prep.demo import inputs as demo
from apertus_jax.prep.robots.compliance import blocked_agents


@pytest.fixture(name="documents", scope="module")
def fixture_documents():
    return demo.demo_documents()


@pytest.fixture(name="labels", scope="module")
def fixture_labels():
    return demo.demo_labels()


def test_documents_are_the_train_split_plus_web_chunks(documents):
    train = load_demo_documents("train")
    web = [d for d in documents if d["source"] == "web_noisy"]
    assert len(documents) == len(train) + len(web)
    assert [d["id"] for d in documents[: len(train)]] == [d["doc_id"] for d in train]
    sentences = [s for s in demo.load_de_corpus_extract() if s["file"] in ("doc-0.json", "doc-1.json")]
    assert len(web) == -(-len(sentences) // demo.WEB_SENTENCES_PER_DOC)
    assert web[0]["text"] == " ".join(s["text"] for s in sentences[: demo.WEB_SENTENCES_PER_DOC])
    assert len({d["id"] for d in documents}) == len(documents)
    assert all(set(d) == {"id", "text", "lang", "source", "url"} for d in documents)


def test_every_document_has_a_url_on_a_bucketed_fictional_host(documents):
    hosts = collections.Counter(d["url"].split("/")[2] for d in documents)
    assert all(h.endswith(".example") for h in hosts)
    sources = {h.rsplit("-", 1)[0] for h in hosts}
    assert sources == {"udhr", "german_prose", "web_noisy"}
    assert all(0 <= int(h.rsplit("-", 1)[1].split(".")[0]) < demo.HOSTS_PER_SOURCE for h in hosts)
    assert set(demo.DEMO_ROBOTS) <= set(hosts)  # every snapshot entry governs some documents
    assert demo.demo_documents()[:50] == documents[:50]  # fixed order and hosts


@pytest.mark.parametrize(
    ("host", "path", "blocked"),
    [
        ("udhr-1.example", "/doc/1", ["GPTBot", "CCBot"]),
        ("german_prose-2.example", "/doc/1", []),  # only /private/ is disallowed
        ("german_prose-3.example", "/doc/1", ["GPTBot", "Google-Extended", "Bytespider", "ClaudeBot"]),
        ("web_noisy-0.example", "/forum/7", ["CCBot"]),
        ("web_noisy-4.example", "/forum/7", []),  # Applebot is not Applebot-Extended
        ("web_noisy-6.example", "/forum/7", []),  # an HTML error page is no robots.txt: allowed
    ],
)
def test_robots_policies_mean_what_the_docstring_says(host, path, blocked):
    found = blocked_agents(demo.DEMO_ROBOTS[host], f"https://{host}{path}")
    assert set(blocked) <= set(found)
    if not blocked:
        assert found == []


@pytest.mark.parametrize(
    ("text", "toxic"),
    [("Halt die Klappe, du Vollidiot!", True), ("Das war echt Mist.", True), ("Mistral und Mistel", False)],
)
def test_toxic_lexicon_matches_whole_words(text, toxic):
    assert bool(demo.TOXIC_LEXICON.search(text.lower())) == toxic


def test_labels_per_head(labels):
    assert set(labels) == {"toxicity", "coherence", "information_value", "educational_quality"}
    toxicity = labels["toxicity"]
    assert {r["label"] for r in toxicity} == {0, 1}
    assert all(bool(demo.TOXIC_LEXICON.search(r["text"].lower())) == (r["label"] == 1) for r in toxicity)
    coherent = sorted(sorted(r["text"].split()) for r in labels["coherence"] if r["label"] == 1)
    shuffled = sorted(sorted(r["text"].split()) for r in labels["coherence"] if r["label"] == 0)
    assert coherent == shuffled  # the negatives are the positives with their words shuffled
    assert {r["label"] for r in labels["educational_quality"]} == {0.0, 2.0, 3.0}
    assert {r["label"] for r in labels["information_value"]} == {0, 1}


def test_labels_are_reproducible(labels):
    again = demo.demo_labels(seed=0)
    assert again["coherence"][:20] == labels["coherence"][:20]
    assert demo.demo_labels(seed=1)["toxicity"] != labels["toxicity"]


def test_write_jsonl_keeps_unicode_and_leaves_no_temporary(tmp_path):
    rows = [{"text": "Grüße, 世界", "label": 1}, {"text": "Zürich", "label": 0}]
    path = tmp_path / "sub" / "rows.jsonl"
    demo.write_jsonl(rows, str(path))
    assert [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] == rows
    assert (
        path.read_bytes() == '{"text": "Grüße, 世界", "label": 1}\n{"text": "Zürich", "label": 0}\n'.encode()
    )
    assert [p.name for p in path.parent.iterdir()] == ["rows.jsonl"]
