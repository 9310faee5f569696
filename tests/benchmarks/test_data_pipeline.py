"""benchmarks.data_pipeline: its JSON report holds the throughput rows and the Goldfish drop rates it prints."""

import json

import pytest


@pytest.mark.slow
def test_json_report_holds_the_printed_drop_rates(tmp_path, run_job):
    path = tmp_path / "report.json"
    flags = ("--seq_len=256", "--batch_size=2", "--batches=2", "--reference_batches=1", f"--json={path}")
    proc = run_job("benchmarks.data_pipeline", *flags)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(path.read_text())
    assert [row["tokens"] for row in report["rows"]] == [1024, 1024, 1024, 512]
    assert f"Apertus rule: {report['apertus_drop_rate']:.4f} " in proc.stdout
    assert f"zero int64 product: {report['zero_product_windows']:.3f}" in proc.stdout
    assert f"mixed hash:   {report['mixed_drop_rate']:.4f}" in proc.stdout
    assert 0 < report["apertus_drop_rate"] < 1 / 50 and report["documents"] > 0


def test_json_into_a_missing_folder_is_one_line_and_exit_2(tmp_path, run_job):
    proc = run_job("benchmarks.data_pipeline", f"--json={tmp_path}/no/report.json")
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert (
        line.startswith(f"error: --json={tmp_path}/no/report.json: the folder ") and "create it first" in line
    )
