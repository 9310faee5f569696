"""Datatrove's local executor in a JAX process: quiet console, complete task logs, no fork start method."""

import warnings

import jax
import multiprocess
from datatrove.executor import LocalPipelineExecutor

from apertus_jax.prep.local_executor import quiet_console, use_forkserver


def count_documents(data, rank, world_size):
    del rank, world_size
    yield from data or ()


def test_console_shows_no_info_lines_but_the_task_log_has_them(tmp_path, capfd):
    """As `run_prepare` sets it up; JAX has started its backend in this test process (other tests)."""
    jax.devices()
    use_forkserver()
    quiet_console()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        LocalPipelineExecutor(pipeline=[count_documents], tasks=2, workers=1, logging_dir=str(tmp_path)).run()
    assert not [w for w in caught if "os.fork()" in str(w.message)]
    err = capfd.readouterr().err
    assert "INFO" not in err and "Stats" not in err, err[:500]
    log = (tmp_path / "logs" / "task_00001.log").read_text()
    assert "Launching pipeline for rank=1" in log and "Stats" in log
    assert (tmp_path / "completions" / "00001").exists()


def test_forkserver_is_the_default_start_method():
    use_forkserver()
    assert multiprocess.get_start_method() == "forkserver"
