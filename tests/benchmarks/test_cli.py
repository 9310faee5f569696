"""The benchmark scripts without a test of their own: each imports and answers a bad flag with one line and
exit status 2 (experiments/cli.py). The others are run by their own test file (attention_parity by
benchmarks/accelerator_check.sh in test_accelerator.py)."""

import pytest

SCRIPTS = ("checkpoint", "loop_overhead", "megatron_read", "profile", "tokenize")


@pytest.mark.parametrize("script", SCRIPTS)
def test_bad_flag_is_one_line_and_exit_2(script, run_job):
    proc = run_job(f"benchmarks.{script}", "--no_such_flag=1")
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line == "error: Unknown command line flag 'no_such_flag' (see --helpshort)"
