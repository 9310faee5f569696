"""Boldt strategies on the data pipeline alone: unique tokens, epochs and component order of each config."""

import numpy as np
import pytest

from apertus_jax.data.config import parse_pipeline
from apertus_jax.data.run_tokenizer import demo_tokenizer
from apertus_jax.data.strategy_report import strategy_report
from apertus_jax.prep.demo import boldt as boldt_demo
from configs.ablations import boldt_strategies

ROWS, SEQ_LEN = 8, 64
STEPS = boldt_strategies.STEPS  # the strategies' own budget
BUDGET = STEPS * ROWS * SEQ_LEN


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    paths = boldt_demo.write_demo_subsets(str(tmp_path_factory.mktemp("boldt")))
    tokenizer = demo_tokenizer(1024)
    return {
        name: strategy_report(parse_pipeline(pipeline), tokenizer, seq_len=SEQ_LEN, rows=ROWS, steps=STEPS)
        for name, pipeline in boldt_strategies.pipelines(paths, BUDGET).items()
    }


def _single_pass(report, component):
    entry = report["components"][component]
    assert entry["draws"] == entry["distinct"] and entry["epochs"] < 1  # no document twice
    # every trained token is new: the consumed documents hold the budget (plus the partial last one)
    assert BUDGET <= report["unique_tokens"] < BUDGET + 20_000
    assert [c for _, c, _ in report["order"]] == [component]


@pytest.mark.slow
def test_random_and_coherence_single_pass(reports):
    _single_pass(reports["random_single"], "pool")
    _single_pass(reports["coherence_single"], "coherence")
    coherent = reports["coherence_single"]["components"]["coherence"]
    assert coherent["documents"] < reports["random_single"]["components"]["pool"]["documents"]


def test_dense_core_is_repeated_to_the_budget(reports):
    entry = reports["dense_core_repeated"]["components"]["dense_core"]
    assert entry["documents"] == boldt_strategies.DENSE_CORE_DOCUMENTS == entry["distinct"]
    expected_epochs = BUDGET / entry["tokens"]
    assert expected_epochs > 1.5
    assert abs(entry["draws"] / entry["documents"] - expected_epochs) < 1  # whole documents per epoch
    assert reports["dense_core_repeated"]["unique_tokens"] == entry["tokens"]


def test_phased_is_random_then_dense_core(reports):
    report = reports["phased"]
    assert [(stage, component) for stage, component, _ in report["order"]] == [
        ("random", "pool"),
        ("dense_core", "dense_core"),
    ]
    pool, dense = report["components"]["pool"], report["components"]["dense_core"]
    assert pool["draws"] == pool["distinct"]
    assert dense["distinct"] == boldt_strategies.DENSE_CORE_DOCUMENTS
    assert abs(dense["draws"] / dense["documents"] - (BUDGET / 2) / dense["tokens"]) < 1


def test_sorted_is_ascending_by_educational_score_in_one_pass(reports):
    report = reports["sorted"]
    scores = np.asarray(report["scores"])
    assert np.all(np.diff(scores) >= 0) and scores[0] < 1 <= boldt_demo.THRESHOLDS["educational_quality"]
    entry = report["components"]["pool"]
    assert entry["documents"] == boldt_strategies.SORTED_DOCUMENTS and entry["draws"] == entry["distinct"]
