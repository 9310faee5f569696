"""The comparison table: medians per runner, our MFU from the model's FLOPs, ratios against the right peer."""

import pytest

from apertus_jax.models import flops
from apertus_jax.models.presets import get_config
from benchmarks import runners
from benchmarks.peers import run as peers_run


def test_table_ratios_pair_each_variant_with_its_peer():
    results = {
        "ours-apertus": [1500.0, 1700.0, 1600.0],
        "transformers": [1000.0, 1200.0],
        "ours-llama": [1800.0],
        "maxtext": [1200.0],
    }
    table = runners.format_table(results, peak_gflops=200.0)
    rows = {line.split("|")[1].strip(): line for line in table.splitlines()[2:]}
    assert "| 1600 | 1500, 1700, 1600 |" in rows["ours-apertus"]
    assert "1.45x vs transformers" in rows["ours-apertus"]  # 1600 / median(1000, 1200) = 1600 / 1100
    assert "1.50x vs maxtext" in rows["ours-llama"]
    mfu = 100 * 1600 * flops.train_flops_per_token(get_config("bench-18m-apertus"), 256) / 200e9
    assert f"{mfu:.1f}%" in rows["ours-apertus"]
    assert rows["maxtext"].rstrip().endswith("|  |  |")  # peers get no MFU and no ratio


def test_missing_peer_gives_no_ratio():
    table = runners.format_table({"ours-llama": [900.0]}, peak_gflops=200.0)
    assert len(table.splitlines()) == 3 and "x vs" not in table.splitlines()[2]


def test_peer_runners_are_peers_of_benchmarks_peers():
    peers = [spec for name, spec in runners.RUNNERS if not name.startswith("ours")]
    assert sorted(peers) == sorted(peers_run.PEERS)
    assert {peer for _, peer in runners.RATIOS} == set(peers)


@pytest.mark.slow
def test_run_peer_reports_a_failing_peer(tmp_path):
    with pytest.raises(RuntimeError, match=r"benchmarks\.peers nosuchpeer .*failed \(rc 2\)"):
        runners.run_peer("nosuchpeer", steps=1, cache=str(tmp_path))


def test_parse_env_gives_every_runner_the_same_assignments():
    env = runners.parse_env(["GLIBC_TUNABLES=glibc.malloc.hugetlb=1", "EMPTY="])
    assert env == {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1", "EMPTY": ""}
    for bad in ("NOEQUALS", "=value"):
        with pytest.raises(ValueError, match="is not KEY=VALUE"):
            runners.parse_env([bad])


@pytest.mark.slow
def test_run_ours_passes_the_environment(tmp_path):
    # An unparseable XLA flag in the runner's environment must reach it and fail it.
    with pytest.raises(RuntimeError, match="benchmarks.train_step"):
        runners.run_ours("bench-18m-apertus", 1, 1.0, [], env={"XLA_FLAGS": "--no_such_flag_anywhere"})


@pytest.mark.parametrize(
    "kwargs", ({"rounds": 0}, {"steps": 0}, {"only": "ours-apertus,nosuch"}, {"env": ["=x"]})
)
def test_usage_errors_are_refused_before_anything_runs(kwargs, tmp_path):
    arguments = {"rounds": 2, "steps": 15, "peers_cache": str(tmp_path), **kwargs}
    with pytest.raises(ValueError, match="must both be >= 1|unknown runner|is not KEY=VALUE"):
        next(runners.compare(**arguments))
    assert not any(tmp_path.iterdir())


def test_usage_error_exits_2_with_one_line(tmp_path, run_job):
    proc = run_job("benchmarks.compare", "--only=ours-apertus,nosuch", f"--peers_cache={tmp_path}")
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: --only: unknown runner(s) ['nosuch']")
