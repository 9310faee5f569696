"""Faults: non-finite steps are skipped and counted; N in a row roll back and skip the data window."""

import signal
import threading

import jax.numpy as jnp
import numpy as np
import pytest

from apertus_jax.config.schema import parse
from apertus_jax.data import process_shards
from apertus_jax.train import loop, loss
from apertus_jax.train.run import Run
from apertus_jax.train.step import Objective
from configs.runs import tiny_resume


def test_counter_rolls_back_after_n_in_a_row():
    counter = loop.NonFiniteCounter(max_in_a_row=3)
    decisions = [counter.record(finite) for finite in [True, False, False, True, False, False, False, False]]
    assert decisions == [False, False, False, False, False, False, True, False]
    assert counter.skipped_total == 6
    assert not any(loop.NonFiniteCounter(0).record(False) for _ in range(10))  # 0 disables rollbacks


@pytest.mark.slow
def test_rollback_restores_last_checkpoint_and_skips_the_window(
    tmp_path, monkeypatch, losses_of, read_records
):
    """Batches 3 and 4 make the loss NaN: both steps are skipped, the run rolls back to step 2 and goes on
    with batch 5, so the new step 3 trains on batch 5 and the run still ends at step 8."""
    poisoned_batches = {3, 4}
    served = []
    next_batch = process_shards.ShardedSource.__next__

    def poisoning_next(self):
        batch = next_batch(self)
        served.append(batch["tokens"].copy())
        if len(served) in poisoned_batches:
            batch["positions"][0, 0] = -1
        return batch

    cross_entropy = loss.cross_entropy()

    def nan_on_negative_position(outputs, mb, frozen):
        hidden_BxTxD, w_DxV = outputs
        hidden_BxTxD = jnp.where(jnp.any(mb["positions"] < 0), jnp.nan, hidden_BxTxD)
        return cross_entropy.loss_fn((hidden_BxTxD, w_DxV), mb, frozen)

    monkeypatch.setattr(process_shards.ShardedSource, "__next__", poisoning_next)
    config = tiny_resume.get_config()
    config.unlock()
    config.train.steps, config.train.batch_plan, config.faults.max_nonfinite_in_a_row = 8, ((0, 256),), 2
    config.train.prefetch_batches = 0  # `served` counts pipeline reads; a prefetch thread reads ahead
    objective = Objective(nan_on_negative_position, reads="hidden")
    assert loop.train(Run(parse(config), objective=objective), str(tmp_path)) == "done"

    records = read_records(str(tmp_path))
    assert [r["step"] for r in records] == list(range(1, 9))  # the skipped steps' lines were rewound
    assert records[-1]["skipped_steps"] == 2 and records[-1]["rollbacks"] == 1
    assert len(served) == 10  # 8 steps + the 2 skipped batches
    assert all(np.isfinite(r["loss"]) for r in records)


def test_sigint_and_sigterm_request_a_clean_stop_and_a_second_ctrl_c_aborts(capfd):
    """The signals reach the object's thread at once: a first Ctrl-C says what the loop will do, a second one
    says it stops at once and aborts the process (here a stand-in for `os._exit(130)`)."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    aborted = threading.Event()
    for signum, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")):
        preemption = loop.PreemptionSignal(
            plan=lambda: "stopping after step 3 and saving it", kept=lambda: 2, abort=aborted.set
        )
        try:
            assert not preemption.should_stop()
            signal.raise_signal(signum)
            assert preemption.should_stop() and preemption.reason() == name
            assert preemption.interrupted == (signum == signal.SIGINT)
            if signum == signal.SIGINT:
                signal.raise_signal(signal.SIGINT)
                assert aborted.wait(5)
        finally:
            preemption.restore_handler()
    assert {s: signal.getsignal(s) for s in before} == before
    assert capfd.readouterr().err.splitlines() == [
        "Ctrl-C: stopping after step 3 and saving it; press Ctrl-C again to stop at once",
        "Ctrl-C again: stopped at once (the checkpoint of step 2 stays); rerun the same command to continue",
    ]


def test_preemption_is_agreed_across_processes_only_every_n_steps(monkeypatch):
    """With several processes the SIGTERM flag is allgathered at multiples of check_every_steps only."""
    import os
    import signal

    gathered = []

    def fake_allgather(x):
        gathered.append(bool(x))
        return np.stack([x, np.array(False)])

    monkeypatch.setattr(loop.jax, "process_count", lambda: 2)
    monkeypatch.setattr(loop.multihost_utils, "process_allgather", fake_allgather)
    preemption = loop.PreemptionSignal(check_every_steps=4)
    try:
        assert [preemption.should_stop(step) for step in range(1, 4)] == [False] * 3 and gathered == []
        os.kill(os.getpid(), signal.SIGTERM)
        assert not preemption.should_stop(5)  # received, but step 5 is not a check step
        assert preemption.should_stop(8) and gathered == [True]
    finally:
        preemption.restore_handler()
