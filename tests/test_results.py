"""The figures that README.md, BENCHMARKS.md and docs/ show are those of their results files, in generated blocks
that name them (docs/results.md); no figure is typed into the prose by hand, and the deterministic ones are those
of a fresh run of the documented commands. The dated benchmark reports name their date, machine, versions, commit
and command."""

import os
import re

import pytest

from tools.measure import processor_kinds, results
from tools.measure.measurements import MEASUREMENTS, RENDERERS, render

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = [os.path.relpath(p, ROOT) for p in results.documents(ROOT)]
REPORTS = os.path.join("benchmarks", "reports")
# Pages whose figures are dated records of one day, not measured again (docs/results.md, "Dated reports").
PROSE_PAGES = [p for p in PAGES if not p.startswith(REPORTS + os.sep)]
REPORT_PAGES = sorted(p for p in PAGES if p.startswith(REPORTS + os.sep))
TEMPLATES = sorted(n[: -len(".md")] for n in os.listdir(os.path.join(ROOT, results.TABLES_DIR)))
# The figures with a decimal point that a page may write by hand: constants and the figures of papers, each with
# the source its line (or, in a table, the table's header) names in words.
CONSTANTS = (
    ("6.93", "ln 1024"),  # the same over the ablations' 1,024 ids
    ("1.44", "log2 e"),  # the mean exposure of a canary never seen
    ("0.72", "(1/14)^(1/8)"),  # the LSH threshold of configs/prep/demo.py
    ("0.102", "5 / 49"),  # arithmetic of QRPO's length normalization
    ("0.05", "5 / 100"),
    ("6.6", "/ 205,188"),  # Muon's optimizer state per parameter at CPU size
    ("0.1", "tests/aot/test_compile_targets.py"),  # a tolerance of that test
    ("0.8", "XIELUActivation"),  # xIELU's alpha_p and beta at init
    ("0.5", "XIELUActivation"),
    ("0.2337", "table[0]"),  # the first entry of the Apertus Goldfish table
    ("0.9999", "Apertus report"),  # the Apertus report's settings and ablation losses
    ("0.1", "Apertus report"),
    ("2.037", "Apertus report"),
    ("2.002", "Apertus report"),
    ("1.997", "Apertus report"),
    ("1.906", "Apertus report"),
    ("1.843", "Apertus report"),
    ("0.31", "Figure 1"),  # its tokenizers' lowest Gini
    ("0.31", "App. I"),
    ("1.0", "§5.4.1"),  # its memorization study: sampling, ROUGE-L, TTR
    ("0.9", "§5.4.1"),
    ("0.18", "Figure 8"),
    ("0.5", "Figure 8"),
    ("0.22", "Table 25"),
    ("0.31", "Table 25"),
    ("0.5", "Table 25"),
    ("60.6", "Boldt paper, Table 1"),  # the Boldt tiers' shares of documents
    ("8.8", "Boldt paper, Table 1"),
    ("6.1", "Boldt paper, Table 1"),
    ("5.1", "Boldt paper, Table 1"),
    ("3.4445", "muon.py"),  # Keller Jordan's Muon: Newton-Schulz coefficients, singular values, lr, momentum
    ("4.7750", "muon.py"),
    ("2.0315", "muon.py"),
    ("0.5", "muon.py"),
    ("1.5", "muon.py"),
    ("0.02", "muon.py"),
    ("0.95", "muon.py"),
    ("0.2", "Moonlight"),  # Moonlight's RMS matching
    ("0.5", "Takeaway 3"),  # the Swiss AI optimizer benchmark's weight decay
)
# The lines a dated report opens with (docs/results.md, "Dated reports").
REPORT_FIELDS = ("Date", "Machine", "Versions", "Commit", "Command")
REPORT_NAME = re.compile(r"(?P<date>\d{4}-\d{2}-\d{2})-[a-z0-9]+(?:-[a-z0-9]+)*\.md")


def read(path: str) -> str:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def placeholders(template: str) -> list[re.Match]:
    return list(results.PLACEHOLDER.finditer(read(os.path.join(results.TABLES_DIR, f"{template}.md"))))


def missing_report_fields(text: str) -> list[str]:
    """The fields of `REPORT_FIELDS` that a report does not open with (`- FIELD: ...` lines after its title)."""
    head = text.split("\n\n", 2)[1] if text.count("\n\n") >= 2 else ""
    return [field for field in REPORT_FIELDS if not re.search(rf"^- {field}: \S", head, re.MULTILINE)]


# The checks, each on a bad input where it must fail (and a good one where it must not).


def test_a_marker_after_a_figure_is_found_outside_code_only():
    text = (
        "the loss is 5.68<!-- result demo.final_loss:.2f --> and ln 4096 = 8.32<!-- reference ln 4096 -->\n"
        "| run | 1.5<!-- result demo.x --> |\n"
        "`an example: 5.68<!-- result demo.final_loss:.2f -->`\n```\n1<!-- result demo.date -->\n```\n"
    )
    assert results.markers(text) == [
        "1: <!-- result demo.final_loss:.2f -->",
        "1: <!-- reference ln 4096 -->",
        "2: <!-- result demo.x -->",
    ]
    assert results.markers("no marker: <!-- begin generated: x --> is a block\n") == []


def test_a_hand_typed_figure_is_found_unless_a_constant_names_its_source_on_its_line():
    text = (
        "the final loss is 5.68, at 1,234.5 tokens/s\n"  # measured figures typed by hand
        "ln 4096 = 8.32, a uniform guess\n"  # a constant with its source
        "8.32 on a line that names no source\n"
        "Python 3.11, section 2.4, arXiv 2509.14233, v3.0.1, `code 1.5`, Llama 3.1\n"  # names, not figures
        "| tier | kept (Boldt paper, Table 1) |\n| --- | --- |\n| Coherence | 60.6% |\n\n"  # the header names it
        "| tier | kept |\n| --- | --- |\n| Coherence | 60.6% |\n"  # no source
        "<!-- begin generated: t -->\nMeasured by ... (docs/results/t.json)\n\n| 2.5 |\n<!-- end generated -->\n"
    )
    constants = [("8.32", "ln 4096"), ("60.6", "Boldt paper, Table 1")]
    assert results.hand_typed_figures(text, constants) == ["1: 5.68", "1: 1,234.5", "3: 8.32", "11: 60.6"]
    assert results.hand_typed_figures("ln 4096 = 8.32\n", []) == ["1: 8.32"]


def test_a_generated_block_whose_first_line_names_no_results_file_is_found():
    text = (
        "<!-- begin generated: bare -->\n| a | 1.5 |\n<!-- end generated -->\n"
        "<!-- begin generated: captioned -->\nMeasured by `python -m tools.measure --only demo` "
        "(docs/results/demo.json): 2026-12-05.\n\n| a | 1.5 |\n<!-- end generated -->\n"
        "```\n<!-- begin generated: example -->\n| a |\n<!-- end generated -->\n```\n"
    )
    assert results.uncaptioned_blocks(text) == ["1: bare"]
    assert [m["name"] for m in results.blocks(text)] == ["bare", "captioned"]  # the one in code is an example
    assert results.regenerate(text, lambda name: f"{name} body\n") == (
        "<!-- begin generated: bare -->\nbare body\n<!-- end generated -->\n"
        "<!-- begin generated: captioned -->\ncaptioned body\n<!-- end generated -->\n"
        "```\n<!-- begin generated: example -->\n| a |\n<!-- end generated -->\n```\n"
    )


def test_a_long_line_of_prose_is_found_but_not_a_table_row_or_code():
    prose, row = "word " * 61, "| " + "cell | " * 60
    text = f"{prose}\n{row}\n```\n{prose}\n```\n    {prose}\nshort\n"
    assert results.long_lines(text) == [f"1: {len(prose)}"]


def test_a_report_without_its_date_machine_versions_commit_or_command_is_found():
    good = (
        "# Topic\n\n- Date: 2026-12-01\n- Machine: a 2-core VM\n- Versions: jax 0.10.2\n- Commit: abc1234\n"
        "- Command: `python -m benchmarks.compare`\n\nBody.\n"
    )
    assert missing_report_fields(good) == []
    assert missing_report_fields(good.replace("- Versions: jax 0.10.2\n", "")) == ["Versions"]
    assert missing_report_fields("# Topic\n\nBody with - Date: in it.\n") == list(REPORT_FIELDS)


def test_a_caption_names_the_command_results_files_dates_commits_and_machines():
    demo = {
        "date": "2026-12-05",
        "commit": "11dac83" + "0" * 33,
        "machine": {"cpus": 2, "load_average": 2.93},
    }
    gpu = {"date": "2026-12-04", "commit": "f5419cd" + "0" * 33, "machine": {"platform": "one NVIDIA H200"}}
    records = {"demo": {**demo, "machine": {**demo["machine"], "vendor": "Intel"}}, "gpu": gpu}
    assert results.caption(["demo"], records.__getitem__) == (
        "Measured by `python -m tools.measure --only demo` (docs/results/demo.json): 2026-12-05, commit 11dac83, "
        "2-core Intel machine at load average 2.9.\n"
    )
    assert results.caption(["gpu", "demo"], records.__getitem__) == (
        "Measured by `python -m tools.measure --only gpu,demo` (docs/results/gpu.json, docs/results/demo.json):\n"
        "- docs/results/gpu.json: 2026-12-04, commit f5419cd, one NVIDIA H200\n"
        "- docs/results/demo.json: 2026-12-05, commit 11dac83, 2-core Intel machine at load average 2.9\n"
    )


def test_a_template_is_filled_from_its_results_file_and_a_missing_value_is_named():
    record = {"date": "2026-12-05", "values": {"loss": 5.681640625, "runs": {"all-gather": {"ops": 451}}}}
    template = "| loss | {demo.loss:.2f} |\n| gathers | {demo.runs.all-gather.ops:,} |\n| date | {demo.date} |\n{a}\n"
    assert (
        results.fill(template, lambda name: record)
        == "| loss | 5.68 |\n| gathers | 451 |\n| date | 2026-12-05 |\n{a}\n"
    )
    with pytest.raises(KeyError, match=r"\{demo.nope\}: no value nope in docs/results/demo.json"):
        results.fill("{demo.nope}", lambda name: record)


# The pages as committed.


@pytest.mark.parametrize("path", PAGES)
def test_every_generated_block_is_its_rendering_and_names_its_results_file(path):
    text = read(path)
    assert results.regenerate(text, lambda block: render(ROOT, block)) == text, (
        f"{path}: a generated block differs from its rendering (python -m tools.measure --rewrite_only)"
    )
    assert not results.uncaptioned_blocks(text), path


@pytest.mark.parametrize("path", PAGES)
def test_no_marker_follows_a_figure(path):
    assert not results.markers(read(path)), f"{path}: show the figure in a generated block (docs/results.md)"


@pytest.mark.parametrize("path", PROSE_PAGES)
def test_no_figure_is_typed_by_hand(path):
    found = results.hand_typed_figures(read(path), CONSTANTS)
    assert not found, f"{path}: hand-typed figures {found}: a generated block, or a constant with its source"


@pytest.mark.parametrize("path", PAGES)
def test_no_line_of_prose_is_over_300_characters(path):
    assert not results.long_lines(read(path)), path


def test_every_constant_is_written_with_its_source():
    """No entry of `CONSTANTS` is left over: each clears a figure of some page, on a line (or under a table
    header) that names its source."""
    used = set()
    for path in PROSE_PAGES:
        text = read(path)
        every = len(results.hand_typed_figures(text, []))
        used |= {c for c in CONSTANTS if len(results.hand_typed_figures(text, [c])) < every}
    assert not [c for c in CONSTANTS if c not in used], [c for c in CONSTANTS if c not in used]


def test_every_table_template_is_shown_by_one_generated_block_and_every_block_is_rendered():
    shown = [m["name"] for path in PAGES for m in results.blocks(read(path))]
    assert sorted(n for n in shown if n in TEMPLATES) == TEMPLATES
    assert set(shown) <= set(TEMPLATES) | set(RENDERERS), sorted(set(shown) - set(TEMPLATES) - set(RENDERERS))
    assert not set(TEMPLATES) & set(RENDERERS)


def test_the_readme_try_it_shows_the_demo_figures_in_one_block():
    section = read("README.md").split("\n## Try it", 1)[1].split("\n## ", 1)[0]
    (block,) = results.blocks(section)
    keys = {f"{m['name']}.{m['path']}" for m in placeholders(block["name"])}
    assert {f"demo.{name}" for name in MEASUREMENTS["demo"].deterministic} <= keys
    assert {"demo.median_tokens_per_s", "demo.wall_seconds"} <= keys
    # the wall time with the processor kind it was measured on, and the other kinds' times
    assert {"demo.machine.processor", "demo.wall_time_elsewhere"} <= keys
    assert block["body"].startswith(
        "Measured by `python -m tools.measure --only demo` (docs/results/demo.json): "
    )


def test_benchmarks_shows_current_figures_and_links_every_dated_report():
    text = read("BENCHMARKS.md")
    assert {"benchmarks_maxtext_tpu", "benchmarks_accelerator_check"} <= {
        m["name"] for m in results.blocks(text)
    }
    linked = sorted(set(re.findall(r"\]\((benchmarks/reports/[^)]+\.md)\)", text)))
    assert linked == REPORT_PAGES and len(REPORT_PAGES) >= 10


@pytest.mark.parametrize("path", REPORT_PAGES)
def test_every_report_names_its_date_machine_versions_commit_and_command(path):
    name = REPORT_NAME.fullmatch(os.path.basename(path))
    assert name, f"{path}: not benchmarks/reports/YYYY-MM-DD-topic.md"
    text = read(path)
    assert not missing_report_fields(text), (path, missing_report_fields(text))
    assert re.search(rf"^- Date: {name['date']}\b", text, re.MULTILINE), f"{path}: its Date is not its name's"


def test_results_files_and_placeholders_are_of_registered_measurements():
    files = {
        n[: -len(".json")] for n in os.listdir(os.path.join(ROOT, results.RESULTS_DIR)) if n.endswith(".json")
    }
    assert files <= set(MEASUREMENTS), f"results files of no measurement: {sorted(files - set(MEASUREMENTS))}"
    named = {m["name"] for template in TEMPLATES for m in placeholders(template)}
    assert named <= files, f"templates name results files that do not exist: {sorted(named - files)}"
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
        if measurement.gather and not os.path.exists(results.results_path(ROOT, name)):
            continue  # run on another machine and not recorded yet: its block says so
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
    kind, samples = results.kind(), results.read_result(ROOT, "processor_spread")["values"]
    for name in group:
        fresh = MEASUREMENTS[name].measure(ROOT, str(tmp_path))
        record = results.read_result(ROOT, name)
        verdict = processor_kinds.check(
            MEASUREMENTS[name].deterministic, fresh, record, kind, samples.get(name, {})
        )
        print(f"{name}: compared {verdict.reference}")
        assert not verdict.disagreements, (name, verdict.reference, verdict.disagreements)
