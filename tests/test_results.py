"""The figures that README.md and docs/ quote are those of their results files (docs/results.md), and the
deterministic ones are those of a fresh run of the documented commands."""

import os
import re

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


# Decimals that are arithmetic, not measurements, in the fully bound sections.
NOT_MEASURED = {"8.32"}  # ln 4096, the loss of a uniform prediction over the demo BPE


def unbound_decimals(text: str) -> list[str]:
    """The numbers with a decimal point outside code and not bound by a marker, of a Markdown text."""
    bound = {(b.start, b.start + len(b.figure)) for b in results.bindings(text)}
    code = [m.span() for m in results.CODE.finditer(text)]
    return [
        m.group()
        for m in re.finditer(r"(?<![\w.])\d[\d,]*\.\d+(?![\w.])", text)
        if m.span() not in bound
        and not any(a <= m.start() < b for a, b in code)
        and m.group() not in NOT_MEASURED
    ]


def test_unbound_decimals_are_found_outside_code_and_markers():
    text = "a 5.68<!-- result demo.final_loss:.2f --> b 5.66 `c 1.5` d 8.32 e v3.0.1\n```\n2.5\n```\n"
    assert unbound_decimals(text) == ["5.66"]


@pytest.mark.parametrize(
    "heading",
    ["## Try it (Python >= 3.11, pip; no accelerator needed)", "### Post-training (SFT, QRPO, DPO)"],
)
def test_every_decimal_of_the_fully_bound_readme_sections_is_bound(heading):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    body = text[text.index(heading + "\n") + len(heading) :]  # the heading's own numbers are not figures
    body = body[: re.search(r"\n#{2,3} ", body).start()]
    assert not unbound_decimals(body), f"{heading}: hand-typed figures; bind them (docs/results.md)"


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
@pytest.mark.parametrize("name", [name for name, m in MEASUREMENTS.items() if m.rechecked])
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
