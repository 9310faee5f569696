"""The figures that README.md and docs/ quote are those of their results files (docs/results.md), and the
deterministic ones are those of a fresh run of the documented commands."""

import os

import pytest

from tools.measure import processor_kinds, results
from tools.measure.measurements import MEASUREMENTS, RENDERERS, TABLES

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
        if results.regenerate(text, lambda block: RENDERERS[block](ROOT)) != text:
            bad.append(f"{os.path.relpath(path, ROOT)}: a generated block differs from its rendering")
    assert not bad, "\n".join(bad) + "\n(python -m tools.measure --rewrite_only rewrites them)"


def test_every_table_template_is_registered_and_shown_by_one_generated_block():
    """docs/results/tables/NAME.md is in `TABLES` and is the generated block NAME of one page (docs/results.md,
    "Generated blocks")."""
    templates = {n[: -len(".md")] for n in os.listdir(os.path.join(ROOT, results.TABLES_DIR))}
    assert templates == set(TABLES)
    shown = []
    for path in results.documents(ROOT):
        with open(path, encoding="utf-8") as f:
            shown += [m["name"] for m in results.GENERATED.finditer(f.read())]
    assert sorted(n for n in shown if n in templates) == sorted(templates)


def test_the_readme_demo_figures_are_bound():
    keys = {b.key for b in bound_documents()["README.md"]}
    assert {f"demo.{name}" for name in MEASUREMENTS["demo"].deterministic} <= keys
    assert {"demo.median_tokens_per_s", "demo.wall_seconds", "demo.date"} <= keys


@pytest.mark.parametrize("path", [os.path.relpath(p, ROOT) for p in results.documents(ROOT)])
def test_every_decimal_figure_is_bound_or_a_reference(path):
    """README.md and every document under docs/: each number with a decimal point outside code is bound to a
    results file or marked as a reference (docs/results.md)."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        unbound = results.unbound_figures(f.read())
    assert not unbound, f"{path}: hand-typed figures {unbound}; bind them (docs/results.md)"


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


# The demo workdir of the first serves the others' commands (their first is the same demo run, then a no-op).
FRESH_GROUPS = [("demo", "evaluation", "posttrain")]
FRESH_GROUPS += [(n,) for n, m in MEASUREMENTS.items() if m.rechecked and n not in FRESH_GROUPS[0]]
# Their rough minutes in CI, by first measurement (tests/conftest.py starts the longest first); 1 for the others.
FRESH_MINUTES = {"demo": 8, "memory_plan": 4, "goldfish_study": 3}


def test_every_rechecked_record_quotes_the_values_of_one_of_its_processor_kinds():
    """The figures a results file quotes are those of a processor kind it keeps a record of (docs/results.md,
    "Across processor kinds"): nobody edited one without the other."""
    for name, measurement in MEASUREMENTS.items():
        record = results.read_result(ROOT, name)
        if not measurement.rechecked:
            assert "processors" not in record, name
            continue
        quoted = {k: record["values"][k] for k in measurement.deterministic}
        kinds = record["processors"]
        assert any(entry["values"] == quoted for entry in kinds.values()), name
        assert all(
            set(entry["values"]) == set(quoted) and len(entry["commit"]) == 40 for entry in kinds.values()
        )


@pytest.mark.parametrize(
    "group",
    [
        pytest.param(g, marks=pytest.mark.slow(minutes=FRESH_MINUTES.get(g[0], 1)), id="+".join(g))
        for g in FRESH_GROUPS
    ],
)
def test_a_fresh_run_gives_the_recorded_deterministic_values(group, tmp_path, monkeypatch):
    # The documented commands run on one device: not on the 8 virtual devices of the tests (tests/conftest.py),
    # whose data-parallel sums round differently. Exactly on a processor kind with a record, else within twice
    # the spread measured across kinds (processor_kinds.check).
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    kind, samples = results.processor(), results.read_result(ROOT, "processor_spread")["values"]
    for name in group:
        fresh = MEASUREMENTS[name].measure(ROOT, str(tmp_path))
        record = results.read_result(ROOT, name)
        verdict = processor_kinds.check(
            MEASUREMENTS[name].deterministic, fresh, record, kind, samples.get(name, {})
        )
        print(f"{name}: compared {verdict.reference}")
        assert not verdict.disagreements, (name, verdict.reference, verdict.disagreements)
