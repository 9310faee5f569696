"""The comparison table: medians per runner, our MFU from the model's FLOPs, ratios against the right peer."""

import pytest

from apertus_jax.models import flops
from apertus_jax.models.presets import get_config
from benchmarks import compare
from benchmarks.peers import run as peers_run


def test_table_ratios_pair_each_variant_with_its_peer():
    results = {
        "ours-apertus": [1500.0, 1700.0, 1600.0],
        "transformers": [1000.0, 1200.0],
        "ours-llama": [1800.0],
        "maxtext": [1200.0],
    }
    table = compare.format_table(results, peak_gflops=200.0)
    rows = {line.split("|")[1].strip(): line for line in table.splitlines()[2:]}
    assert "| 1600 | 1500, 1700, 1600 |" in rows["ours-apertus"]
    assert "1.45x vs transformers" in rows["ours-apertus"]  # 1600 / median(1000, 1200) = 1600 / 1100
    assert "1.50x vs maxtext" in rows["ours-llama"]
    mfu = 100 * 1600 * flops.train_flops_per_token(get_config("bench-18m-apertus"), 256) / 200e9
    assert f"{mfu:.1f}%" in rows["ours-apertus"]
    assert rows["maxtext"].rstrip().endswith("|  |  |")  # peers get no MFU and no ratio


def test_missing_peer_gives_no_ratio():
    table = compare.format_table({"ours-llama": [900.0]}, peak_gflops=200.0)
    assert len(table.splitlines()) == 3 and "x vs" not in table.splitlines()[2]


def test_peer_runners_are_peers_of_benchmarks_peers():
    peers = [spec for name, spec in compare.RUNNERS if not name.startswith("ours")]
    assert sorted(peers) == sorted(peers_run.PEERS)
    assert {peer for _, peer in compare.RATIOS} == set(peers)


def test_run_peer_reports_a_failing_peer(tmp_path):
    with pytest.raises(RuntimeError, match=r"benchmarks\.peers nosuchpeer .*failed \(rc 2\)"):
        compare.run_peer("nosuchpeer", steps=1, cache=str(tmp_path))


def test_parse_env_gives_every_runner_the_same_assignments():
    env = compare.parse_env(["GLIBC_TUNABLES=glibc.malloc.hugetlb=1", "EMPTY="])
    assert env == {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1", "EMPTY": ""}
    for bad in ("NOEQUALS", "=value"):
        with pytest.raises(ValueError, match="is not KEY=VALUE"):
            compare.parse_env([bad])


def test_run_ours_passes_the_environment(tmp_path):
    # An unparseable XLA flag in the runner's environment must reach it and fail it.
    with pytest.raises(RuntimeError, match="benchmarks.train_step"):
        compare.run_ours("bench-18m-apertus", 1, 1.0, [], env={"XLA_FLAGS": "--no_such_flag_anywhere"})


@pytest.mark.parametrize(
    "args", (["--rounds=0"], ["--steps=0"], ["--only=ours-apertus,nosuch"], ["--env==x"])
)
def test_usage_errors_exit_2_before_anything_runs(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        compare.main(args)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err
