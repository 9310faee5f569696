"""The figures that README.md and docs/ quote are those of their results files (docs/results.md), and the
deterministic ones are those of a fresh run of the documented commands."""

import os

import pytest

from apertus_jax.jobs import results
from apertus_jax.jobs.measurements import MEASUREMENTS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bound_documents() -> dict[str, list[results.Binding]]:
    found = {}
    for path in results.documents(ROOT):
        with open(path, encoding="utf-8") as f:
            found[os.path.relpath(path, ROOT)] = results.bindings(f.read())
    return found


def test_every_bound_figure_is_its_results_file_value():
    bad = []
    for path in results.documents(ROOT):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        bad += [
            f"{os.path.relpath(path, ROOT)}:{m}"
            for m in results.mismatches(text, lambda n: results.read_result(ROOT, n))
        ]
    assert not bad, "\n".join(bad) + "\n(python -m experiments.measure --rewrite_only rewrites them)"


def test_the_readme_demo_figures_are_bound():
    keys = {b.key for b in bound_documents()["README.md"]}
    assert {f"demo.{name}" for name in MEASUREMENTS["demo"].deterministic} <= keys
    assert {"demo.median_tokens_per_s", "demo.wall_seconds", "demo.date"} <= keys


def test_results_files_and_bindings_are_of_registered_measurements():
    files = {
        n[: -len(".json")] for n in os.listdir(os.path.join(ROOT, results.RESULTS_DIR)) if n.endswith(".json")
    }
    assert files <= set(MEASUREMENTS), f"results files of no measurement: {sorted(files - set(MEASUREMENTS))}"
    named = {b.name for found in bound_documents().values() for b in found}
    assert named <= files, f"bound to results files that do not exist: {sorted(named - files)}"
    for name in files:
        record = results.read_result(ROOT, name)
        assert set(MEASUREMENTS[name].deterministic) <= set(record["values"]), name
        assert record["command"] == MEASUREMENTS[name].command and len(record["commit"]) == 40


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MEASUREMENTS))
def test_a_fresh_run_gives_the_recorded_deterministic_values(name, tmp_path, monkeypatch):
    # The documented commands run on one device: not on the 8 virtual devices of the tests (tests/conftest.py),
    # whose data-parallel sums round differently. Same machine kind, same code: bitwise the same values.
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    measurement = MEASUREMENTS[name]
    fresh = measurement.measure(ROOT, str(tmp_path))
    recorded = results.read_result(ROOT, name)["values"]
    assert {k: fresh[k] for k in measurement.deterministic} == {
        k: recorded[k] for k in measurement.deterministic
    }
