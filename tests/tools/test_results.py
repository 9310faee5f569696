"""Results files and bound figures: markers are read, checked and rewritten to the formatted value."""

import json
import os
import subprocess

import pytest

from tools.measure import results

RECORD = {
    "command": "python -m experiments.pretrain",
    "date": "2026-12-02",
    "commit": "9e3ec44a1b2c3d4e5f60718293a4b5c6d7e8f901",
    "machine": {"cpus": 2, "load_average": 9.13},
    "seconds": 61.0,
    "values": {"final_loss": 5.681640625, "tokens_per_s": 14769.4, "wall_seconds": 58.04},
}
TEXT = (
    "# Demo\n"
    "final 5.66<!-- result demo.final_loss:.2f --> at 1,000<!-- result demo.tokens_per_s:,.0f --> tokens/s\n"
    "(measured 2026-12-01<!-- result demo.date --> at 9e3ec44<!-- result demo.commit:.7 -->, "
    "load 9.1<!-- result demo.machine.load_average:.1f -->).\n"
)


def record_of(name):
    if name != "demo":
        raise FileNotFoundError(f"docs/results/{name}.json does not exist")
    return RECORD


def test_bindings_read_figure_key_spec_and_line():
    found = results.bindings(TEXT)
    assert [(b.figure, b.key, b.spec, b.line) for b in found] == [
        ("5.66", "demo.final_loss", ".2f", 2),
        ("1,000", "demo.tokens_per_s", ",.0f", 2),
        ("2026-12-01", "demo.date", "", 3),
        ("9e3ec44", "demo.commit", ".7", 3),
        ("9.1", "demo.machine.load_average", ".1f", 3),
    ]
    assert TEXT[found[0].start : found[0].end] == "5.66<!-- result demo.final_loss:.2f -->"


def test_markers_in_code_are_examples_not_bindings():
    text = (
        "```\nfinal 5.66<!-- result demo.final_loss:.2f -->\n```\n"
        "`1<!-- result demo.date -->` and `<!-- result NAME.PATH:SPEC -->`, but 2<!-- result demo.date -->\n"
    )
    assert [(b.figure, b.line) for b in results.bindings(text)] == [("2", 4)]
    assert results.malformed(text) == []
    assert results.rewrite(text, record_of) == text.replace("but 2<", "but 2026-12-02<")


def test_lookup_reads_values_first_then_the_record():
    assert results.lookup(RECORD, "final_loss") == 5.681640625
    assert results.lookup(RECORD, "machine.cpus") == 2
    with pytest.raises(KeyError, match="no value machine.gpus"):
        results.lookup(RECORD, "machine.gpus")


def test_rewrite_writes_the_formatted_values_and_keeps_the_markers():
    new = results.rewrite(TEXT, record_of)
    assert new == (
        "# Demo\n"
        "final 5.68<!-- result demo.final_loss:.2f --> at 14,769<!-- result demo.tokens_per_s:,.0f --> "
        "tokens/s\n(measured 2026-12-02<!-- result demo.date --> at 9e3ec44<!-- result demo.commit:.7 -->, "
        "load 9.1<!-- result demo.machine.load_average:.1f -->).\n"
    )
    assert results.rewrite(new, record_of) == new
    assert results.mismatches(new, record_of) == []


def test_mismatches_name_the_line_the_figure_and_the_value():
    assert results.mismatches(TEXT, record_of) == [
        "2: demo.final_loss is 5.66, its results file says 5.68",
        "2: demo.tokens_per_s is 1,000, its results file says 14,769",
        "3: demo.date is 2026-12-01, its results file says 2026-12-02",
    ]


def test_missing_values_files_and_figures_are_reported():
    text = (
        "a 1.0<!-- result demo.nope:.1f -->\n"
        "b 2.0<!-- result other.x:.1f -->\n"
        "c 3<!-- result demo.date:.2f -->\n"
        "d (<!-- result demo.final_loss:.2f -->)\n"
        "e 4<!-- result demo -->\n"
    )
    found = results.mismatches(text, record_of)
    assert found[:2] == [
        f"{line}: a marker with no figure just before it, or not of the form <!-- result NAME.PATH[:SPEC] --> or "
        "<!-- reference SOURCE --> (docs/results.md)"
        for line in (4, 5)
    ]
    assert found[2] == "1: demo.nope: no value nope in docs/results/demo.json"
    assert found[3] == "2: docs/results/other.json does not exist"
    assert found[4].startswith("3: ") and "format code 'f'" in found[4]
    with pytest.raises(ValueError, match="^4: a marker with no figure"):
        results.rewrite(text, record_of)


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


def test_rewrite_documents_writes_only_changed_documents(tmp_path):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "demo.json").write_text(json.dumps(RECORD))
    (tmp_path / "README.md").write_text(TEXT)
    (tmp_path / "docs" / "same.md").write_text("no figures\n")
    assert list(results.documents(str(tmp_path))) == [
        str(tmp_path / "README.md"),
        str(tmp_path / "docs" / "same.md"),
    ]
    (tmp_path / "docs" / "table.md").write_text(
        "A table:\n<!-- begin generated: table -->\nold 1.5\n<!-- end generated -->\nafter 2.5\n"
    )
    render = {"table": "| a |\n| 2.25 |\n"}.__getitem__
    assert results.rewrite_documents(str(tmp_path), render) == [
        str(tmp_path / "README.md"),
        str(tmp_path / "docs" / "table.md"),
    ]
    assert "final 5.68<!--" in (tmp_path / "README.md").read_text()
    table = (tmp_path / "docs" / "table.md").read_text()
    assert (
        table
        == "A table:\n<!-- begin generated: table -->\n| a |\n| 2.25 |\n<!-- end generated -->\nafter 2.5\n"
    )
    assert results.rewrite_documents(str(tmp_path), render) == []
    # a generated block's figures come from its renderer; those outside it are checked as ever
    assert results.unbound_figures(table) == ["6: 2.5"]
    with pytest.raises(KeyError):
        results.regenerate(table, {}.__getitem__)


def test_render_table_rewrites_its_template_and_drops_the_markers(tmp_path):
    """A generated table's body: its template's figures from their results file, without their markers."""
    (tmp_path / "docs" / "results" / "tables").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "demo.json").write_text(json.dumps(RECORD))
    (tmp_path / "docs" / "results" / "tables" / "losses.md").write_text(
        "| run | loss | tokens/s |\n| --- | --- | --- |\n"
        "| demo | **5.60<!-- result demo.final_loss:.2f -->** | 1,000<!-- result demo.tokens_per_s:,.0f --> |\n"
        "| ln 4096 | 8.32<!-- reference ln 4096 --> | - |\n"
    )
    assert results.render_table(str(tmp_path), "losses") == (
        "| run | loss | tokens/s |\n| --- | --- | --- |\n| demo | **5.68** | 14,769 |\n| ln 4096 | 8.32 | - |\n"
    )
    with pytest.raises(FileNotFoundError):
        results.render_table(str(tmp_path), "other")


def test_render_provenance_is_one_line_of_date_commit_machine_and_results_file():
    record = {
        "date": "2026-12-02",
        "commit": "88146e1" + "0" * 33,
        "machine": {"cpus": 2, "load_average": 4.83},
    }
    assert results.render_provenance(
        "demo", {**record, "machine": {**record["machine"], "vendor": "Intel"}}
    ) == (
        "Measured 2026-12-02, commit 88146e1, 2-core Intel machine at load average 4.8: docs/results/demo.json.\n"
    )
    assert ", 2-core machine at" in results.render_provenance("demo", record)


def test_references_mark_figures_not_measured_here_and_unbound_figures_are_the_rest():
    text = (
        "loss 2.037<!-- reference Apertus report, section 2.4 --> vs 5.68<!-- result demo.final_loss:.2f -->,\n"
        "ln 4096 = 8.32<!-- reference ln 4096 -->; typed 5.66 and 1,234.5; `code 1.5`; version v3.0.1;\n"
        "names: arXiv 2509.14233, section 2.4, Python 3.11, docs/a1.5.md, 1.5b-preset; -0.5<!-- result d.x:+.1f -->\n"
        "```\n2.5\n```\n"
        "bad <!-- reference nothing before --> and 3.1<!-- reference -->\n"
        "shares 60.6%<!-- reference Boldt paper, Table 1 -->, 1.99%<!-- result goldfish_rates.mixed_drop_rate:.2% -->\n"
        "a figure with its unit: 1.56%<!-- result goldfish_rates.apertus_drop_rate:.2% -->\n"
    )
    assert results.references(text) == [
        ("2.037", "Apertus report, section 2.4"),
        ("8.32", "ln 4096"),
        ("60.6%", "Boldt paper, Table 1"),
    ]
    assert results.unbound_figures(text) == ["2: 5.66", "2: 1,234.5", "7: 3.1"]
    assert [line.split(":")[0] for line in results.malformed(text)] == ["7", "7"]


def test_signed_percent_and_never_figures_are_bound_whole():
    record = {"values": {"share": 0.0424, "delta": -0.5, "reach": "-"}}
    text = (
        "**4.2%<!-- result demo.share:.1% -->**, +0.175<!-- result demo.delta:+.3f -->, "
        "| -<!-- result demo.reach --> |\n"
    )
    assert [b.figure for b in results.bindings(text)] == ["4.2%", "+0.175", "-"]
    assert results.unbound_figures(text) == [] and results.malformed(text) == []
    assert results.rewrite(text, lambda name: record) == text.replace("+0.175", "-0.500")
