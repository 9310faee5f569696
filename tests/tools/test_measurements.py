"""The measurement registry: names selected by --only, and documented commands that name what exists."""

import os
import shlex
import subprocess

import pytest

from tools.measure import demo, measurements, results
from tools.measure.measurements import MEASUREMENTS, REPO, selected


def test_only_selects_in_registry_order_and_rejects_unknown_names():
    assert selected(None) == selected([]) == list(MEASUREMENTS)
    assert list(MEASUREMENTS)[:3] == ["demo", "posttrain", "evaluation"]
    assert selected(["evaluation", "demo"]) == ["demo", "evaluation"]
    with pytest.raises(ValueError, match=f"no measurement nope; known: {', '.join(MEASUREMENTS)}$"):
        selected(["demo", "nope"])


@pytest.mark.parametrize("name", list(MEASUREMENTS))
def test_measured_commands_name_existing_modules_and_configs(name):
    measurement = MEASUREMENTS[name]
    assert set(measurement.deterministic) and len(set(measurement.deterministic)) == len(
        measurement.deterministic
    )
    for line in measurement.command.splitlines():
        if line.startswith("(cd /tmp && "):
            continue  # a shell step that fetches into the scratch directory (tokenizer_fairness: npm pack)
        argv = shlex.split(line.split("  #")[0])
        if argv[1].endswith(".sh"):  # a shell script of the repository (accelerator_check)
            assert os.path.isfile(os.path.join(REPO, argv[1])), line
            continue
        assert argv[0] == "python" and argv[1] in ("-m", "-c"), line
        if argv[1] == "-m":
            module = os.path.join(REPO, *argv[2].split("."))
            assert os.path.isfile(module + ".py") or os.path.isfile(module + "/__main__.py"), line
        for arg in argv[3:]:
            if arg.startswith("--config="):
                assert os.path.isfile(os.path.join(REPO, arg.split("=", 1)[1].partition(":")[0])), line


def test_measure_all_writes_the_results_file_and_rewrites_the_generated_blocks(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "docs" / "results" / "tables").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "tables" / "fake_table.md").write_text(
        "| x | {fake.x:.1f} |\n| y | {fake.y} |\n"
    )
    (tmp_path / "README.md").write_text(
        "x and y:\n<!-- begin generated: fake_table -->\n<!-- end generated -->\n"
    )
    subprocess.run(["git", "-C", str(tmp_path), "add", "README.md"], check=True)
    git_user = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "-C", str(tmp_path), *git_user, "commit", "-qm", "a"], check=True)
    scratches = []

    def fake(root, scratch):
        scratches.append(scratch)
        assert root == str(tmp_path) and os.listdir(scratch) == []
        return {"x": 1.5 * len(scratches), "y": "yes"}

    monkeypatch.setitem(
        measurements.MEASUREMENTS, "fake", measurements.Measurement("python -m fake", fake, ("x",))
    )
    assert measurements.measure_all(str(tmp_path), ["fake"]) == [str(tmp_path / "README.md")]
    first = results.read_result(str(tmp_path), "fake")
    caption = results.caption(["fake"], {"fake": first}.__getitem__)
    assert caption.startswith("Measured by `python -m tools.measure --only fake` (docs/results/fake.json): ")
    assert (tmp_path / "README.md").read_text() == (
        f"x and y:\n<!-- begin generated: fake_table -->\n{caption}\n| x | 1.5 |\n| y | yes |\n<!-- end generated -->\n"
    )
    assert first["command"] == "python -m fake" and first["values"] == {"x": 1.5, "y": "yes"}
    assert not os.path.exists(scratches[0])  # the scratch directory is removed
    assert measurements.changed_deterministic("fake", first, {"x": 1.5, "y": "no"}) == []
    assert measurements.changed_deterministic("fake", first, {"x": 3.0, "y": "yes"}) == ["x 1.5 -> 3.0"]
    assert measurements.changed_deterministic("fake", None, {"x": 3.0}) == []
    measurements.measure_all(str(tmp_path), ["fake"])
    assert "| x | 3.0 |" in (tmp_path / "README.md").read_text()
    assert measurements.measure_all(str(tmp_path), []) == []  # --rewrite_only: nothing changes


def test_render_uses_the_renderer_of_a_block_else_its_template():
    assert set(measurements.RENDERERS) == {
        "cpu_portability",
        "processor_spread",
        "check_regressions",
        "apertus_targets",
    }
    spread = measurements.render(REPO, "processor_spread")
    assert spread.startswith("Measured by `python -m tools.measure --only processor_spread`")
    assert measurements.render(REPO, "readme_demo").startswith(
        "Measured by `python -m tools.measure --only demo`"
    )
    with pytest.raises(FileNotFoundError):
        measurements.render(REPO, "no_such_block")


def test_the_demo_wall_time_of_the_other_kinds_is_their_own_or_not_yet_measured():
    intel, amd = (
        "Intel(R) Xeon(R) Processor (AVX-512, family 6 model 167) with jax 0.10.2",
        "AMD EPYC (AVX2, family 25 model 1) with jax 0.10.2",
    )
    timed = {"values": {"final_loss": 5.8}, "times": {"wall_seconds": 131.4}}
    machine = {"processor": "Intel(R) Xeon(R) Processor (AVX-512, family 6 model 167)", "stack": "jax 0.10.2"}
    record = {"machine": machine, "processors": {intel: timed, amd: timed}}
    assert demo.wall_time_elsewhere(record) == f"{amd}: 131 s"
    record["processors"][amd] = {"values": {"final_loss": 5.8}}  # recorded before times were
    assert demo.wall_time_elsewhere(record) == f"not yet measured on {amd}"
    del record["processors"][amd]
    assert demo.wall_time_elsewhere(record) == "no other processor kind measured"


def test_the_readme_demo_block_names_the_kind_of_its_time_and_the_other_kinds_times():
    """Before: "wall time ... | 50 s", of an Intel Xeon, read as the time on any machine."""
    record = results.read_result(REPO, "demo")
    block = measurements.render(REPO, "readme_demo")
    assert f"| wall time on {record['machine']['processor']}, " in block
    elsewhere = demo.wall_time_elsewhere(record)
    assert f"| the same run's wall time on the other processor kinds recorded | {elsewhere} |" in block
    assert set(record["processors"]) - {record["machine"]["processor"]}  # there is another kind to name
