"""experiments.fetch_robots as a CLI: a missing --domains file is one line, exit 2, nothing written."""


def test_missing_domains_file_is_one_line_and_nothing_is_written(tmp_path, run_job):
    result = run_job(
        "experiments.fetch_robots",
        f"--domains={tmp_path / 'domains.txt'}",
        f"--out={tmp_path / 'out' / 'robots.jsonl'}",
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("error: ") and "domains.txt" in lines[0]
    assert not list(tmp_path.iterdir())


def test_an_earlier_snapshot_is_replaced_but_a_folder_as_out_is_refused_before_any_fetch(tmp_path, run_job):
    """`cli.check_output_file`: an existing --out file is the earlier snapshot (replaced at the end); a folder
    is one line naming --out before any fetch (0 hosts here: nothing to fetch)."""
    earlier, domains = tmp_path / "robots.jsonl", tmp_path / "domains.txt"
    earlier.write_text("old\n")
    domains.write_text("# no hosts\n")
    result = run_job("experiments.fetch_robots", f"--domains={domains}", f"--out={earlier}")
    assert result.returncode == 0 and result.stdout == f"0 hosts -> {earlier}\n", result.stderr[-2000:]
    assert earlier.read_text() == ""
    result = run_job("experiments.fetch_robots", f"--domains={domains}", f"--out={tmp_path}")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"error: --out {tmp_path} is a directory; pass --out= a file name"
    ], result.stderr[-2000:]
