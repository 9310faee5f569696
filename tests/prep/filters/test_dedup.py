"""Deduplication stages on datatrove's dedup steps: planted exact and near duplicates in real German text."""

import functools
import pathlib
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apertus_jax.data.shards import ShardSource, decode_metadata
from apertus_jax.prep.demo import inputs as demo
from apertus_jax.prep.executors import build_executors, resolve_work_dir
from apertus_jax.prep.filters.dedup import (
    EXACT_REASON,
    NEAR_REASON,
    detection_probability,
    jaccard_threshold,
    minhash_config,
    minhash_signature_step,
)
from apertus_jax.prep.prepare import run_prepare
from apertus_jax.tokenizers import load_tokenizer
from configs.prep import demo as demo_config

N_UNIQUE, N_EXACT, N_NEAR = 16, 3, 3


@functools.cache
def _signature_step():
    return minhash_signature_step("/nonexistent", minhash_config(demo_config.get_config().dedup.minhash))


@functools.cache
def _shingles(text: str) -> frozenset[int]:
    """datatrove's own shingles (hashed word 5-grams of the normalized text), the sets MinHash estimates."""
    return frozenset(_signature_step().get_shingles(text).ravel().tolist())


def _jaccard(a: str, b: str) -> float:
    sa, sb = _shingles(a), _shingles(b)
    return len(sa & sb) / len(sa | sb)


def _near_copy(text: str, rng: random.Random) -> str:
    """The text with one word in 100 replaced by another word of the same text (a light edit)."""
    words = text.split()
    for i in rng.sample(range(len(words)), max(1, len(words) // 100)):
        words[i] = rng.choice(words)
    return " ".join(words)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """German prose documents with planted exact copies, near copies and one related-but-distinct text."""
    rng = random.Random(0)
    prose = [d for d in demo.demo_documents() if d["source"] == "german_prose"]
    long_docs = [d for d in prose if len(d["text"].split()) >= 200][: N_UNIQUE + 1]
    unique = [{**d, "id": f"unique/{i}"} for i, d in enumerate(long_docs[:N_UNIQUE])]
    exact = [{**unique[i], "id": f"exact/{i}"} for i in range(N_EXACT)]
    near = [
        {**unique[N_EXACT + i], "id": f"near/{i}", "text": _near_copy(unique[N_EXACT + i]["text"], rng)}
        for i in range(N_NEAR)
    ]
    # Half of one document followed by the start of another: related, but far below the threshold.
    a, b = unique[-1]["text"].split(), long_docs[N_UNIQUE]["text"].split()
    related = {**unique[-1], "id": "related/0", "text": " ".join(a[: len(a) // 3] + b[: len(b) // 2])}
    docs = unique + exact + near + [related]
    rng.shuffle(docs)
    root = tmp_path_factory.mktemp("dedup_inputs")
    for i in range(4):
        demo.write_jsonl(docs[i::4], str(root / "input" / f"part-{i:05d}.jsonl"))
    return {
        "input_dir": str(root / "input"),
        "unique": unique,
        "exact": exact,
        "near": near,
        "related": related,
    }


def _config(inputs, work_dir, workers):
    config = demo_config.get_config()
    config.demo = False
    config.work_dir, config.input_dir = str(work_dir), inputs["input_dir"]
    config.robots.enabled = config.pii.enabled = False
    config.toxicity.enabled = config.quality.enabled = False
    config.executor.tasks, config.executor.workers = 2, workers
    return resolve_work_dir(config)


@pytest.fixture(scope="module")
def runs(planted, tmp_path_factory):
    out = {}
    for workers in (1, 2):
        config = _config(planted, tmp_path_factory.mktemp(f"dedup_w{workers}"), workers)
        out[workers] = (config, run_prepare(config))
    return out


def _kept_ids(config) -> list[str]:
    source = ShardSource(config.output_dir, load_tokenizer("tekken"))
    return sorted(decode_metadata(source._record(i))["id"] for i in range(len(source)))


@pytest.mark.slow
def test_planted_similarities_straddle_the_threshold(planted):
    threshold = jaccard_threshold(14, 8)
    assert 0.71 < threshold < 0.73
    for i, doc in enumerate(planted["near"]):
        assert doc["text"] != planted["unique"][N_EXACT + i]["text"]
        assert _jaccard(doc["text"], planted["unique"][N_EXACT + i]["text"]) > 0.85
    assert _jaccard(planted["related"]["text"], planted["unique"][-1]["text"]) < 0.4
    unique = planted["unique"]
    assert max(_jaccard(a["text"], b["text"]) for i, a in enumerate(unique) for b in unique[i + 1 :]) < 0.3


@pytest.mark.slow
def test_duplicates_removed_unique_kept(runs, planted):
    config, report = runs[1]
    kept = _kept_ids(config)
    # Each original with its copy is one group: datatrove keeps exactly one of them (the lower input index).
    group = {f"exact/{i}": f"unique/{i}" for i in range(N_EXACT)}
    group |= {f"near/{i}": f"unique/{N_EXACT + i}" for i in range(N_NEAR)}
    assert len(kept) == N_UNIQUE + 1 and "related/0" in kept
    assert sorted({group.get(i, i) for i in kept}) == sorted(
        [d["id"] for d in planted["unique"]] + ["related/0"]
    )
    removed = report["removed"]
    assert removed[EXACT_REASON]["docs"] == N_EXACT and removed[NEAR_REASON]["docs"] == N_NEAR
    assert removed[EXACT_REASON]["by_language"] == {"de": N_EXACT}
    steps = {s["step"].split(": ", 1)[-1]: s for s in report["stages"]["filter"]}
    tokenizer = load_tokenizer("tekken")
    exact_tokens = sum(len(tokenizer.encode(d["text"])) for d in planted["exact"])
    assert steps[f"dedup: {EXACT_REASON}"]["removed_by_reason"][EXACT_REASON]["tokens"] == exact_tokens
    assert steps[f"dedup: {NEAR_REASON}"]["docs_in"] == len(kept) + N_NEAR


@pytest.mark.slow
def test_one_and_two_workers_identical(runs):
    (c1, _), (c2, _) = runs[1], runs[2]
    files = lambda c: {
        str(p.relative_to(c.output_dir)): p.read_bytes()
        for p in sorted(pathlib.Path(c.output_dir).rglob("*.array_record"))
    }
    assert files(c1) == files(c2) and files(c1)
    assert runs[1][1]["removed"] == runs[2][1]["removed"]


def test_dedup_stages_in_executors(planted, tmp_path):
    config = _config(planted, tmp_path, 1)
    executors = build_executors(config)
    assert list(executors)[:5] == [
        "exact_signatures",
        "exact_duplicates",
        "minhash_signatures",
        "minhash_buckets",
        "minhash_clusters",
    ]
    assert executors["minhash_buckets"].tasks == 14 and executors["exact_signatures"].tasks == 2
    assert executors["filter"].depends is executors["minhash_clusters"]
    config.dedup.exact.enabled = config.dedup.minhash.enabled = False
    assert list(build_executors(config))[0] == "filter"


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.integers(1, 30), st.integers(1, 16))
def test_detection_probability_monotone_in_similarity(s1, s2, bands, rows):
    low, high = sorted((s1, s2))
    assert detection_probability(low, bands, rows) <= detection_probability(high, bands, rows) + 1e-12
    # At the threshold a pair is caught with probability 1 - (1 - 1/b)^b (about 1 - 1/e).
    at = detection_probability(jaccard_threshold(bands, rows), bands, rows)
    assert at == pytest.approx(1 - (1 - 1 / bands) ** bands)
