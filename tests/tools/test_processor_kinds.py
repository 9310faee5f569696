"""Records per processor kind: the exact rule on a recorded kind, the spread-based tolerance elsewhere, stale
records dropped, and the deliberate regressions still applicable to today's code."""

import importlib.metadata
import math
import os
import re
import subprocess

import pytest

from tools.measure import measurements, processor_kinds, results
from tools.measure.measurements import REPO
from tools.measure.processor_kinds import REGRESSIONS, check, kept_processors, leaves, spreads

INTEL_CPU, AMD_CPU, STACK = (
    "Intel(R) Xeon(R) Processor (AVX-512)",
    "AMD EPYC (AVX2, family 25 model 1)",
    "jax 0.10.2",
)
INTEL, AMD = f"{INTEL_CPU} with {STACK}", f"{AMD_CPU} with {STACK}"
AMD_CURRENT = "AMD EPYC (AVX2, family 25 model 1) with jax 0.12.0.1"
DETERMINISTIC = ("loss", "plan", "fits")


def _record(values, processors):
    return {"values": values, "machine": {"processor": INTEL}, "commit": "a" * 40, "date": "2026-12-01",
            "processors": {k: {"values": v, "commit": "b" * 40, "date": "2026-12-02"} for k, v in processors.items()}}  # fmt: skip


def test_leaves_and_spreads_of_nested_values():
    assert leaves({"a": 1, "b": {"c": 2.0, "d": {"e": "x"}}}) == {"a": 1, "b.c": 2.0, "b.d.e": "x"}
    samples = {
        INTEL: {"loss": 5.0, "plan": {"gb": 1.5}, "fits": "yes", "n": 3},
        AMD: {"loss": 5.25, "plan": {"gb": 1.5}, "fits": "no", "n": 3},
        f"{AMD}, rsqrt_exact": {"loss": 4.875, "plan": {"gb": 1.5}, "fits": "no"},
    }
    # max - min of numbers; alike strings 0; differing strings or a value missing from a sample: inf
    assert spreads(samples) == {"loss": 0.375, "plan.gb": 0.0, "fits": math.inf, "n": math.inf}
    assert spreads({}) == {}


def test_a_recorded_kind_is_compared_exactly_and_says_so():
    values = {"loss": 5.0, "plan": {"gb": 1.5}, "fits": "yes", "seconds": 9.0}
    record = _record(values, {INTEL: {"loss": 5.0, "plan": {"gb": 1.5}, "fits": "yes"}, AMD: {"loss": 5.25, "plan": {"gb": 1.5}, "fits": "yes"}})  # fmt: skip
    samples = {INTEL: {"loss": 5.0}, AMD: {"loss": 5.25}}  # a spread of 0.25: not used on a recorded kind
    fresh = {
        "loss": 5.25,
        "plan": {"gb": 1.5},
        "fits": "yes",
        "seconds": 1.0,
    }  # seconds are not deterministic
    verdict = check(DETERMINISTIC, fresh, record, AMD, samples)
    assert (
        verdict.disagreements == []
        and verdict.reference == f"exactly, the record of {AMD} (bbbbbbb, 2026-12-02)"
    )
    off_by_a_bit = {**fresh, "loss": math.nextafter(5.25, 6.0), "plan": {"gb": 1.5000001}}
    assert check(DETERMINISTIC, off_by_a_bit, record, AMD, samples).disagreements == [
        f"loss 5.25 -> {math.nextafter(5.25, 6.0)}",
        "plan.gb 1.5 -> 1.5000001",
    ]
    assert check(DETERMINISTIC, values, record, AMD, samples).disagreements == ["loss 5.25 -> 5.0"]


def test_an_unrecorded_kind_gets_twice_the_measured_spread_against_the_quoted_values():
    record = _record({"loss": 5.0, "plan": {"gb": 1.5}, "fits": "yes"}, {INTEL: {"loss": 5.0, "plan": {"gb": 1.5}, "fits": "yes"}})  # fmt: skip
    samples = {INTEL: {"loss": 5.0, "plan": {"gb": 1.5}, "fits": "yes"}, AMD: {"loss": 5.25, "plan": {"gb": 1.5}, "fits": "yes"}}  # fmt: skip
    other = "Intel(R) Xeon(R) Processor (AVX2)"
    within = {"loss": 5.5, "plan": {"gb": 1.5}, "fits": "yes"}  # |5.5 - 5.0| = 2 x 0.25
    verdict = check(DETERMINISTIC, within, record, other, samples)
    assert verdict.disagreements == []
    assert verdict.reference == (
        f"within 2x the measured spread, the record of {INTEL} (aaaaaaa, 2026-12-01): no record of {other}"
    )
    beyond = {"loss": 4.49, "plan": {"gb": 1.51}, "fits": "no"}  # no spread of gb or fits: exact
    assert check(DETERMINISTIC, beyond, record, other, samples).disagreements == [
        "loss 5.0 -> 4.49",
        "plan.gb 1.5 -> 1.51",
        "fits yes -> no",
    ]
    # no samples at all: exact
    assert check(DETERMINISTIC, within, record, other, {}).disagreements == ["loss 5.0 -> 5.5"]
    # a value the fresh run lacks, or one it adds (a new plan row), disagrees
    assert check(DETERMINISTIC, {**within, "plan": {}}, record, other, samples).disagreements == [
        "plan.gb 1.5 -> None"
    ]


def test_other_kinds_are_kept_only_when_this_kind_reproduced_its_own_record():
    previous = _record({"loss": 5.0}, {INTEL: {"loss": 5.0}, AMD: {"loss": 5.25}})
    same = {"values": {"loss": 5.25}, "commit": "c" * 40, "date": "2026-12-03"}
    kept, dropped = kept_processors(previous, AMD, same)
    assert kept == {INTEL: previous["processors"][INTEL], AMD: same} and dropped == []
    moved = {**same, "values": {"loss": 5.3}}
    assert kept_processors(previous, AMD, moved) == ({AMD: moved}, [INTEL])
    # a kind with no record of its own cannot tell whether the code moved the values: the others are dropped
    other = "Other (AVX2) with jax 0.10.2"
    assert kept_processors(previous, other, same) == ({other: same}, [AMD, INTEL])
    # another stack's records are its own: a measurement on this one leaves them, and they leave it
    assert kept_processors(previous, AMD_CURRENT, moved) == (
        {**previous["processors"], AMD_CURRENT: moved},
        [],
    )
    with_current = _record({"loss": 5.0}, {INTEL: {"loss": 5.0}, AMD_CURRENT: {"loss": 5.3}})
    kept, dropped = kept_processors(with_current, AMD, moved)
    assert kept == {AMD_CURRENT: with_current["processors"][AMD_CURRENT], AMD: moved} and dropped == [INTEL]
    assert kept_processors(None, AMD, same) == ({AMD: same}, [])
    # tuples in fresh values compare as the lists JSON reads back
    previous = _record({"r": [1, 2]}, {AMD: {"r": [1, 2]}, INTEL: {"r": [1, 2]}})
    assert kept_processors(previous, AMD, {**same, "values": {"r": (1, 2)}})[1] == []


def test_the_processor_kind_names_the_model_and_its_widest_vector_instructions():
    kind = results.processor()
    assert re.fullmatch(r".+ \((AVX-512|AVX2|AVX|SSE), family \d+ model \d+\)", kind), kind
    assert results.kind() == f"{kind} with jax {importlib.metadata.version('jax')}"
    assert results.stack_of(results.kind()) == results.stack() == f"jax {importlib.metadata.version('jax')}"


def _git_repo(path):
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
    git_user = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "-C", str(path), *git_user, "commit", "-qm", "a"], check=True)


def test_measure_processor_only_adds_this_kind_and_a_moved_value_drops_the_others(tmp_path, monkeypatch):
    (tmp_path / "docs" / "results" / "tables").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "tables" / "fake_x.md").write_text("| x | {fake.x:.1f} |\n")
    (tmp_path / "README.md").write_text("<!-- begin generated: fake_x -->\n<!-- end generated -->\n")
    _git_repo(tmp_path)
    runs = []

    def fake(root, scratch):
        runs.append(scratch)
        return {"x": 1.5 if len(runs) < 3 else 2.5, "run_seconds": float(len(runs))}

    monkeypatch.setitem(
        measurements.MEASUREMENTS, "fake", measurements.Measurement("python -m fake", fake, ("x",))
    )
    monkeypatch.setattr(results, "stack", lambda: STACK)  # the records' stack, whichever this Python's is
    monkeypatch.setattr(results, "processor", lambda: INTEL_CPU)
    root = str(tmp_path)
    with pytest.raises(FileNotFoundError, match="fake has no results file to add"):
        measurements.measure_all(root, ["fake"], processor_only=True)
    measurements.measure_all(root, ["fake"])
    monkeypatch.setattr(results, "processor", lambda: AMD_CPU)
    assert measurements.measure_all(root, ["fake"], processor_only=True) == []  # nothing rewritten
    record = results.read_result(root, "fake")
    assert record["values"] == {"x": 1.5, "run_seconds": 1.0} and record["machine"]["processor"] == INTEL_CPU
    assert {k: v["values"] for k, v in record["processors"].items()} == {INTEL: {"x": 1.5}, AMD: {"x": 1.5}}
    measurements.measure_all(root, ["fake"])  # on AMD, x moved to 2.5: the Intel record is stale
    record = results.read_result(root, "fake")
    assert {k: v["values"] for k, v in record["processors"].items()} == {AMD: {"x": 2.5}}
    assert (tmp_path / "README.md").read_text().endswith("\n| x | 2.5 |\n<!-- end generated -->\n")
    monkeypatch.setitem(
        measurements.MEASUREMENTS,
        "fake",
        measurements.Measurement("python -m fake", fake, ("x",), rechecked=False),
    )
    with pytest.raises(ValueError, match="not re-checked by the tests"):
        measurements.measure_all(root, ["fake"], processor_only=True)


def test_each_kind_keeps_the_times_of_its_latest_measurement(tmp_path, monkeypatch):
    """A measurement's `times` (its seconds) go into the record of the kind that measured them, beside its
    deterministic values, and stay there when another kind measures: the docs can quote each kind's time."""
    (tmp_path / "README.md").write_text("no block\n")
    _git_repo(tmp_path)
    runs = []

    def fake(root, scratch):
        runs.append(scratch)
        return {"x": 1.5, "run_seconds": 10.0 * len(runs)}

    monkeypatch.setitem(
        measurements.MEASUREMENTS,
        "fake",
        measurements.Measurement("python -m fake", fake, ("x",), times=("run_seconds",)),
    )
    root = str(tmp_path)
    monkeypatch.setattr(results, "stack", lambda: STACK)  # the records' stack, whichever this Python's is
    monkeypatch.setattr(results, "processor", lambda: INTEL_CPU)
    measurements.measure_all(root, ["fake"])
    monkeypatch.setattr(results, "processor", lambda: AMD_CPU)
    measurements.measure_all(root, ["fake"], processor_only=True)
    record = results.read_result(root, "fake")
    assert {k: v["times"] for k, v in record["processors"].items()} == {
        INTEL: {"run_seconds": 10.0},
        AMD: {"run_seconds": 20.0},
    }
    measurements.measure_all(root, ["fake"])  # AMD reproduced its own values: Intel's record and time stay
    record = results.read_result(root, "fake")
    assert record["values"]["run_seconds"] == 30.0 and results.kind_of(record) == AMD
    assert {k: v["times"] for k, v in record["processors"].items()} == {
        INTEL: {"run_seconds": 10.0},
        AMD: {"run_seconds": 30.0},
    }


@pytest.mark.parametrize("name", list(REGRESSIONS))
def test_each_deliberate_regression_still_applies_to_todays_code(name, tmp_path):
    """The regression demonstration (check_regressions) edits today's code: each edit must still match once."""
    regression = REGRESSIONS[name]
    with open(os.path.join(REPO, regression.path), encoding="utf-8") as f:
        assert f.read().count(regression.old) == 1, regression.path
    assert set(regression.measurements) <= {n for n, m in measurements.MEASUREMENTS.items() if m.rechecked}


def test_a_patched_tree_applies_the_regression_to_a_worktree_of_head(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "m.py").write_text("K = 50\n")
    _git_repo(repo)
    regression = processor_kinds.Regression("k off", "pkg/m.py", "K = 50", "K = 49", ("demo",))
    tree = processor_kinds._patched_tree(str(repo), str(tmp_path / "tree"), regression)
    assert (tmp_path / "tree" / "pkg" / "m.py").read_text() == "K = 49\n"
    assert (repo / "pkg" / "m.py").read_text() == "K = 50\n"  # the checkout itself is untouched
    gone = processor_kinds.Regression("gone", "pkg/m.py", "K = 7", "K = 8", ("demo",))
    with pytest.raises(ValueError, match="is not there once; update REGRESSIONS"):
        processor_kinds._patched_tree(str(repo), str(tmp_path / "tree2"), gone)
    subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", tree], check=True)


def test_the_spread_table_lists_the_figures_that_moved_and_names_the_rest():
    spread = {
        "demo": {
            INTEL: {"loss": 5.0, "steps": 300, "plan": {"gb": 1.5, "fits": "yes"}},
            AMD: {"loss": 5.25, "steps": 300, "plan": {"gb": 1.5, "fits": "yes"}},
            f"{AMD} under rsqrt_exact": {"loss": 5.125, "steps": 300, "plan": {"gb": 1.5, "fits": "yes"}},
            f"{AMD} under no_fma": {"loss": 4.75, "steps": 300, "plan": {"gb": 1.5, "fits": "yes"}},
        }
    }
    assert processor_kinds.render_spread(spread).splitlines() == [
        "**demo** (2 kinds, 2 perturbed runs):",
        "",
        f"| figure | {INTEL} | {AMD} | perturbed runs | spread | tolerance |",
        "| --- | --- | --- | --- | --- | --- |",
        "| loss | 5 | 5.25 | 4.75 to 5.125 | 0.5 | 1 |",
        "",
        "Alike in every sample (exact everywhere): steps, plan.",
    ]


def test_the_regression_table_says_which_rule_failed_on_how_many_figures():
    found = {
        "none": {"demo": {"exact": [], "tolerance": []}},
        "loss_mask": {
            "demo": {
                "exact": ["first10_mean 8.1 -> 8.2", "final_loss 5.8 -> 6.1"],
                "tolerance": ["final_loss 5.8 -> 6.1"],
            },  # fmt: skip
            "posttrain": {"exact": ["sft_final_loss 1.7 -> 1.9"], "tolerance": []},
        },
        "goldfish_hash": {
            "goldfish_rates": dict.fromkeys(("exact", "tolerance"), ["failed: `python -m ...`"])
        },
    }
    assert processor_kinds.render_regressions(found).splitlines()[2:] == [
        "| none | none (HEAD as committed) | demo | passes | passes |",
        f"| loss_mask | {REGRESSIONS['loss_mask'].what} | demo | fails (2: first10_mean, ...) | fails (1: final_loss) |",
        "| loss_mask |  | posttrain | fails (1: sft_final_loss) | passes |",
        f"| goldfish_hash | {REGRESSIONS['goldfish_hash'].what} | goldfish_rates | fails (the command fails) |"
        " fails (the command fails) |",
    ]
