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
