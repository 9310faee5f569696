"""Results files and generated blocks: records are written with their provenance, and the blocks of the pages are
rendered from them (templates with placeholders, renderers) under a caption that names the results file."""

import json
import os
import subprocess

import pytest

from tools.measure import results

RECORD = {
    "command": "python -m experiments.pretrain",
    "date": "2026-12-02",
    "commit": "9e3ec44a1b2c3d4e5f60718293a4b5c6d7e8f901",
    "machine": {"cpus": 2, "vendor": "Intel", "load_average": 9.13},
    "seconds": 61.0,
    "values": {"final_loss": 5.681640625, "tokens_per_s": 14769.4, "wall_seconds": 58.04},
}
CAPTION = (
    "Measured by `python -m tools.measure --only demo` (docs/results/demo.json): 2026-12-02, commit 9e3ec44, "
    "2-core Intel machine at load average 9.1.\n"
)


def test_lookup_reads_values_first_then_the_record():
    assert results.lookup(RECORD, "final_loss") == 5.681640625
    assert results.lookup(RECORD, "machine.cpus") == 2
    with pytest.raises(KeyError, match="no value machine.gpus"):
        results.lookup(RECORD, "machine.gpus")


def test_write_result_records_provenance_and_rejects_clashing_names(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(tmp_path), "add", "a.py"], check=True)
    subprocess.run(
        ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a"],
        check=True,
    )
    (tmp_path / "a.py").write_text("x = 2\n")
    (tmp_path / "b.py").write_text("y = 1\n")
    (tmp_path / "notes.md").write_text("figures\n")
    start = results.provenance(str(tmp_path))
    assert len(start["commit"]) == 40 and start["uncommitted"] == ["a.py", "b.py"]
    assert start["machine"]["cpus"] == os.cpu_count() and len(start["date"]) == 10
    kinds = {"AMD EPYC (AVX2, family 25 model 1)": {"values": {"loss": 1.5}, "commit": "a" * 40, "date": "d"}}
    path = results.write_result(str(tmp_path), "demo", "python -m x", {"loss": 1.5}, start, 12.34, kinds)
    assert path == str(tmp_path / "docs" / "results" / "demo.json")
    with open(path) as f:
        record = json.load(f)
    assert record == {
        "command": "python -m x",
        **start,
        "seconds": 12.3,
        "values": {"loss": 1.5},
        "processors": kinds,
    }
    assert results.read_result(str(tmp_path), "demo") == record
    results.write_result(str(tmp_path), "demo", "python -m x", {"loss": 1.5}, start, 12.34, None)
    assert "processors" not in results.read_result(str(tmp_path), "demo")  # a measurement not re-checked
    with pytest.raises(ValueError, match=r"value names \['date'\] are fields"):
        results.write_result(str(tmp_path), "demo", "python -m x", {"date": 1}, start, 1.0, None)
    with pytest.raises(FileNotFoundError, match="--only other writes it"):
        results.read_result(str(tmp_path), "other")


def test_rewrite_documents_regenerates_the_blocks_of_the_pages_only(tmp_path):
    """The pages are README.md, BENCHMARKS.md, docs/ without the templates, and the reports; only the pages whose
    blocks change are written, and a second rewrite changes nothing."""
    (tmp_path / "docs" / "results" / "tables").mkdir(parents=True)
    (tmp_path / "benchmarks" / "reports").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "demo.json").write_text(json.dumps(RECORD))
    (tmp_path / "docs" / "results" / "tables" / "table.md").write_text("| a |\n")
    (tmp_path / "README.md").write_text(
        "A table:\n<!-- begin generated: table -->\nold 1.5\n<!-- end generated -->\n"
    )
    (tmp_path / "docs" / "same.md").write_text("no figures\n")
    (tmp_path / "benchmarks" / "reports" / "2026-12-01-x.md").write_text("# x\n")
    assert list(results.documents(str(tmp_path))) == [
        str(tmp_path / "README.md"),
        str(tmp_path / "docs" / "same.md"),
        str(tmp_path / "benchmarks" / "reports" / "2026-12-01-x.md"),
    ]
    render = {"table": "| a |\n| 2.25 |\n"}.__getitem__
    assert results.rewrite_documents(str(tmp_path), render) == [str(tmp_path / "README.md")]
    assert (tmp_path / "README.md").read_text() == (
        "A table:\n<!-- begin generated: table -->\n| a |\n| 2.25 |\n<!-- end generated -->\n"
    )
    assert results.rewrite_documents(str(tmp_path), render) == []
    with pytest.raises(KeyError):
        results.regenerate((tmp_path / "README.md").read_text(), {}.__getitem__)


def test_render_table_fills_its_template_under_the_caption_of_its_results_files(tmp_path):
    (tmp_path / "docs" / "results" / "tables").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "demo.json").write_text(json.dumps(RECORD))
    (tmp_path / "docs" / "results" / "tables" / "losses.md").write_text(
        "| run | loss | tokens/s |\n| --- | --- | --- |\n"
        "| demo | **{demo.final_loss:.2f}** | {demo.tokens_per_s:,.0f} |\n| ln 4096 | 8.32 | - |\n"
    )
    assert results.render_table(str(tmp_path), "losses") == (
        f"{CAPTION}\n| run | loss | tokens/s |\n| --- | --- | --- |\n| demo | **5.68** | 14,769 |\n"
        "| ln 4096 | 8.32 | - |\n"
    )
    with pytest.raises(FileNotFoundError):
        results.render_table(str(tmp_path), "other")
    (tmp_path / "docs" / "results" / "tables" / "derived.md").write_text(
        "| {demo.machine.vendor} | {demo.minutes:.2f} min |\n"
    )
    minutes = {"demo": lambda record: {"minutes": record["values"]["wall_seconds"] / 60}}
    assert results.render_table(str(tmp_path), "derived", minutes) == f"{CAPTION}\n| Intel | 0.97 min |\n"


def test_render_values_renders_the_values_of_its_results_file_under_its_caption(tmp_path):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "demo.json").write_text(json.dumps(RECORD))
    table = results.render_values(
        str(tmp_path), "demo", lambda values: f"| loss | {values['final_loss']:.1f} |\n"
    )
    assert table == f"{CAPTION}\n| loss | 5.7 |\n"


def test_the_machine_of_a_caption_is_its_cores_vendor_and_load_or_its_platform():
    assert results.machine(RECORD) == "2-core Intel machine at load average 9.1"
    assert (
        results.machine({"machine": {"cpus": 2, "load_average": 1.0}}) == "2-core machine at load average 1.0"
    )
    assert results.machine({"machine": {"platform": "one NVIDIA H200", "cpus": 16}}) == "one NVIDIA H200"
