"""experiments.build_demo_corpus as a CLI: without npm/apt-get/dpkg-deb, one line, exit 2, nothing written."""


def test_missing_tools_are_one_line_and_nothing_is_written(tmp_path, run_job):
    (tmp_path / "bin").mkdir()  # a PATH without the registry tools
    result = run_job(
        "experiments.build_demo_corpus",
        "--out",
        str(tmp_path / "assets"),
        f"--cache={tmp_path / 'cache'}",
        env=dict(PATH=str(tmp_path / "bin")),
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("error: npm, apt-get, dpkg-deb not found")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]
