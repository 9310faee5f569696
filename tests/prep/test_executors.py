"""The full pipeline with datatrove's local executor on real multilingual text; executor configs."""

import gzip
import json
import pathlib
import re
import warnings

import grain
import numpy as np
import pytest
from datatrove.executor import LocalPipelineExecutor, SlurmPipelineExecutor
from datatrove.executor.ray import RayPipelineExecutor

from apertus_jax.data.provenance import prep_summary
from apertus_jax.data.shards import ShardSource, decode_metadata, decode_tokens, load_manifest
from apertus_jax.prep.executors import build_executors
from apertus_jax.prep.filters.dedup import STAGES as DEDUP_STAGES
from apertus_jax.prep.filters.pii import anonymize_pii
from apertus_jax.prep.filters.toxicity import removal_count
from apertus_jax.prep.prepare import run_prepare
from apertus_jax.prep.stats import format_report
from apertus_jax.tokenizers import load_tokenizer
from configs.prep import slurm as slurm_config


@pytest.fixture(scope="module")
def runs(small_inputs, small_config, tmp_path_factory):
    """The same config run with 1 and with 2 local workers (2 tasks each); "warnings": what they warned."""
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for workers in (1, 2):
            config = small_config(small_inputs, tmp_path_factory.mktemp(f"run_w{workers}"), workers=workers)
            out[workers] = (config, run_prepare(config))
    out["warnings"] = [str(w.message) for w in caught]
    return out


@pytest.mark.slow
def test_no_fork_of_the_jax_process(runs):
    """JAX runs in this process (the heads were trained with it); datatrove's manager and workers must not
    be forked from it (JAX warns "os.fork() ... deadlock")."""
    assert not [w for w in runs["warnings"] if "os.fork()" in w]


@pytest.mark.slow
def test_rerun_says_it_reuses_the_completed_tasks(runs, caplog):
    config, report = runs[1]
    config.executor.workers = 2  # a setting that does not change the output
    with caplog.at_level("WARNING"):
        again = run_prepare(config)
    messages = [r.getMessage() for r in caplog.records if "reusing" in r.getMessage()]
    assert len(messages) == 1 and re.search(r"reusing (\d+) of \1 tasks .*nothing to run", messages[0])
    assert f"--config.work_dir or delete {config.work_dir}" in messages[0]
    assert again == report  # the earlier run's report, as the message says


def _files(directory: pathlib.Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()
    }


@pytest.mark.slow
def test_two_workers_give_identical_output(runs):
    (c1, _), (c2, _) = runs[1], runs[2]
    shards1, shards2 = _files(pathlib.Path(c1.output_dir)), _files(pathlib.Path(c2.output_dir))
    assert sorted(shards1) == sorted(shards2) and any(k.endswith(".array_record") for k in shards1)
    for name in shards1:
        if name == "prep_stats.json":  # holds timings; its counts must agree
            assert json.loads(shards1[name])["removed"] == json.loads(shards2[name])["removed"]
        elif name.endswith("manifest.json"):
            m1, m2 = json.loads(shards1[name]), json.loads(shards2[name])
            m1.pop("created"), m2.pop("created")
            assert m1 == m2
        else:
            assert shards1[name] == shards2[name], name
    scored = lambda c: {
        p.name: gzip.decompress(p.read_bytes()) for p in pathlib.Path(c.work_dir, "scored").iterdir()
    }
    assert scored(c1) == scored(c2)


@pytest.mark.slow
def test_report_counts(runs, small_inputs):
    config, report = runs[1]
    steps = {s["step"].split(": ")[-1]: s for stage in report["stages"].values() for s in stage}
    n_docs = len(small_inputs["docs"])
    assert steps["count tokens"]["docs_in"] == n_docs
    assert (
        steps["robots.txt"]["docs_removed"]
        == steps["robots.txt"]["removed_by_reason"]["robots_opt_out"]["docs"]
        > 0
    )
    assert report["robots_by_agent"]["GPTBot"]["docs"] == steps["robots.txt"]["docs_removed"]
    assert "CCBot" in report["robots_by_agent"] and "Diffbot" not in report["robots_by_agent"]
    thresholds = json.loads(pathlib.Path(config.work_dir, "toxicity_thresholds.json").read_text())
    expected = sum(removal_count(n) for n in thresholds["documents"].values())
    assert abs(steps["toxicity"]["docs_removed"] - expected) <= len(thresholds["documents"])
    kept = steps["ArrayRecord shards"]["docs_in"]
    dedup = sum(report["removed"].get(r, {}).get("docs", 0) for r in ("exact_duplicate", "near_duplicate"))
    assert kept == n_docs - dedup - steps["robots.txt"]["docs_removed"] - steps["toxicity"]["docs_removed"]
    tiers = {row["subset"]: row for row in report["tiers"]}
    assert tiers["coherence"]["documents"] >= tiers["dense_core"]["documents"]
    assert tiers["dense_core"]["documents"] <= min(
        tiers[t]["documents"] for t in ("information_value", "educational_quality")
    )
    assert steps["PII"]["counters"]["docs_skipped"] == 1
    table = format_report(report)
    assert "robots_opt_out" in table and "dense_core" in table and "docs/s/worker" in table
    assert pathlib.Path(config.work_dir, "prep_stats.json").read_text() == json.dumps(report, indent=1)
    # A copy next to the shard manifest: what a training run's provenance record reads.
    copied = json.loads(pathlib.Path(config.output_dir, "prep_stats.json").read_text())
    summary = prep_summary(copied)
    assert summary["pii_replacements"] == {
        k.split("/")[1]: int(v) for k, v in steps["PII"]["counters"].items() if k.startswith("pii/")
    }
    assert summary["removed"]["robots_opt_out"]["docs"] == steps["robots.txt"]["docs_removed"]
    assert summary["robots_by_agent"] == report["robots_by_agent"]


@pytest.mark.slow
def test_shards_read_by_training_source_and_code_untouched(runs, small_inputs):
    config, report = runs[1]
    code_doc = small_inputs["code_doc"]
    tokenizer = load_tokenizer("tekken")
    source = ShardSource(config.output_dir, tokenizer)
    steps = {s["step"].split(": ")[-1]: s for stage in report["stages"].values() for s in stage}
    assert len(source) == steps["ArrayRecord shards"]["docs_in"]
    manifest = load_manifest(config.output_dir, tokenizer)
    records = grain.sources.ArrayRecordDataSource(
        [f"{manifest['directory']}/{s['path']}" for s in manifest["shards"]]
    )
    texts = {}
    for i in range(len(source)):
        tokens = source[i]
        assert tokens[0] == tokenizer.bod_id and tokens[-1] == tokenizer.eod_id
        np.testing.assert_array_equal(decode_tokens(records[i]), tokens)
        texts[decode_metadata(records[i])["id"]] = tokenizer.decode(tokens)
    assert texts[code_doc["id"]] == code_doc["text"]  # code sources keep their addresses (no PII pass)
    # Every other document went through the PII pass: nothing is left for a second pass to replace.
    assert all(
        anonymize_pii(t)[1] == {"email": 0, "ip": 0, "iban": 0}
        for i, t in texts.items()
        if i != code_doc["id"]
    )
    assert any("<email-pii>" in t or "<ip-pii>" in t for t in texts.values())


def test_slurm_and_ray_executors_build_from_config(small_inputs, tmp_path):
    config = slurm_config.get_config()
    config.work_dir, config.output_dir = str(tmp_path / "work"), str(tmp_path / "out")
    for name, path in small_inputs["heads"].items():
        config.heads[name].path = path
    executors = build_executors(config)
    assert list(executors) == [*DEDUP_STAGES, "filter", "thresholds", "select", "merge"]
    assert all(isinstance(e, SlurmPipelineExecutor) for e in executors.values())
    assert executors["filter"].tasks == 1000 and executors["thresholds"].tasks == 1
    assert (
        executors["merge"].depends is executors["select"]
        and executors["filter"].depends is executors["minhash_clusters"]
    )
    assert executors["exact_signatures"].depends is None and executors["minhash_buckets"].tasks == 14
    config.executor.kind = "ray"
    assert all(isinstance(e, RayPipelineExecutor) for e in build_executors(config).values())
    config.executor.kind = "local"
    assert all(isinstance(e, LocalPipelineExecutor) for e in build_executors(config).values())
    config.executor.kind = "spark"
    with pytest.raises(ValueError, match="executor kind"):
        build_executors(config)
