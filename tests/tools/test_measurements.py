"""The measurement registry: names selected by --only, and documented commands that name what exists."""

import json
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
        "gpu_profile",
    }
    spread = measurements.render(REPO, "processor_spread")
    assert spread.startswith("Measured by `python -m tools.measure --only processor_spread`")
    assert measurements.render(REPO, "readme_demo").startswith(
        "Measured by `python -m tools.measure --only demo`"
    )
    with pytest.raises(FileNotFoundError):
        measurements.render(REPO, "no_such_block")


def git_checkout(root) -> None:
    """ROOT as a git checkout with one commit (what `results.provenance` reads)."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    git_user = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    subprocess.run(["git", "-C", str(root), *git_user, "commit", "-qm", "a"], check=True)


def test_from_dir_records_a_run_made_elsewhere_with_its_machine_and_rewrites_its_block(tmp_path, monkeypatch):
    """--from_dir runs nothing: the values and machine come from the --out directory (`Measurement.gather`);
    the block of a renderer says 'not measured yet' until then. A measurement without `gather` is refused."""
    root, out = tmp_path / "repo", tmp_path / "out"
    root.mkdir()
    out.mkdir()
    (out / "step.json").write_text(json.dumps({"ms": 12.5}))
    (root / "BENCHMARKS.md").write_text("GPU:\n<!-- begin generated: fake_gpu -->\n<!-- end generated -->\n")
    git_checkout(root)

    def gather(out_dir):
        with open(os.path.join(out_dir, "step.json")) as f:
            return {"step": json.load(f)}, {"platform": "one NVIDIA H100 80GB HBM3, jax 0.11.2", "cpus": 16}

    def measure(root, scratch):
        raise AssertionError("--from_dir runs nothing")

    fake = measurements.Measurement(
        "bash run.sh --out DIR", measure, ("step",), rechecked=False, gather=gather
    )
    monkeypatch.setitem(measurements.MEASUREMENTS, "fake_gpu", fake)
    monkeypatch.setitem(
        measurements.RENDERERS, "fake_gpu", lambda values: f"| ms | {values['step']['ms']} |\n"
    )
    assert measurements.render(str(root), "fake_gpu") == (
        "Not measured yet: `python -m tools.measure --only fake_gpu` writes docs/results/fake_gpu.json.\n"
    )
    monkeypatch.setitem(
        measurements.MEASUREMENTS, "demo_like", measurements.Measurement("x", measure, ("a",))
    )
    with pytest.raises(
        ValueError, match=r"--from_dir: demo_like: name with --only .* \(gpu_profile, fake_gpu\)"
    ):
        measurements.measure_all(str(root), ["demo_like"], from_dir=str(out))
    with pytest.raises(FileNotFoundError, match="is no directory"):
        measurements.measure_all(str(root), ["fake_gpu"], from_dir=str(tmp_path / "nope"))
    measurements.measure_all(str(root), ["fake_gpu"], from_dir=str(out))
    record = results.read_result(str(root), "fake_gpu")
    assert record["values"] == {"step": {"ms": 12.5}} and record["command"] == "bash run.sh --out DIR"
    assert record["machine"] == {"platform": "one NVIDIA H100 80GB HBM3, jax 0.11.2", "cpus": 16}
    assert "processors" not in record and len(record["commit"]) == 40
    text = (root / "BENCHMARKS.md").read_text()
    assert (
        f"docs/results/fake_gpu.json): {record['date']}, commit {record['commit'][:7]}, one NVIDIA H100"
        in text
    )
    assert "\n| ms | 12.5 |\n<!-- end generated -->" in text


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
