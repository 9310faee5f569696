"""Fault handling: counting non-finite steps (rollback trigger) and stopping on SIGTERM or SIGINT (Ctrl-C).

Apertus restarted from the last good checkpoint by hand and skipped the batches that blew up (report,
section on training stability); `NonFiniteCounter` automates that decision.
"""

import signal

import jax
import numpy as np
from jax.experimental import multihost_utils


class NonFiniteCounter:
    """Counts skipped (non-finite) steps; `record` says when to roll back.

    Args:
      max_in_a_row: roll back after this many consecutive non-finite steps (0 disables rollbacks).
    """

    def __init__(self, max_in_a_row: int, skipped_total: int = 0):
        self.max_in_a_row = max_in_a_row
        self.in_a_row = 0
        self.skipped_total = skipped_total

    def record(self, finite: bool) -> bool:
        """Registers one step; returns True when the caller must roll back now."""
        if finite:
            self.in_a_row = 0
            return False
        self.in_a_row += 1
        self.skipped_total += 1
        if self.max_in_a_row and self.in_a_row >= self.max_in_a_row:
            self.in_a_row = 0
            return True
        return False


class PreemptionSignal:
    """Sets a flag on SIGTERM (cluster preemption) or SIGINT (Ctrl-C) so the loop can save a checkpoint at the
    current step and exit 0; both signals mean the same: stop cleanly, resume later with the same command.

    A second SIGINT while the first is pending raises KeyboardInterrupt at once (a user pressing Ctrl-C
    twice wants out now; the last complete checkpoint stays valid, Orbax renames a save only when done).
    With several processes the flag is OR-reduced across them (an allgather, which synchronizes the hosts)
    only at steps that are multiples of `check_every_steps`, so all processes stop at the same step (a save
    is a collective operation) without a host barrier at every step. A single process reads its flag at
    every step (no communication).

    Args:
      check_every_steps: >= 1; multi-process check interval in steps (the cluster's grace period after
        SIGTERM must cover that many steps plus a save).
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, check_every_steps: int = 1):
        self.check_every_steps = check_every_steps
        self.received: str | None = None  # "SIGTERM" | "SIGINT" once one arrived in this process
        self._previous = {signum: signal.signal(signum, self._handle) for signum in self.SIGNALS}

    def _handle(self, signum, frame):
        del frame
        if signum == signal.SIGINT and self.received == "SIGINT":
            raise KeyboardInterrupt
        self.received = signal.Signals(signum).name

    def should_stop(self, step: int = 0) -> bool:
        """True when the run must stop before `step + 1` (call it with the same `step` on every process)."""
        if jax.process_count() == 1:
            return self.received is not None
        if step % self.check_every_steps:
            return False
        flag = np.array(self.received is not None)
        return bool(np.any(multihost_utils.process_allgather(flag)))

    def request(self, reason: str) -> None:
        """Asks for the same clean stop as a signal, from inside the process (`reason` names it in the log)."""
        self.received = self.received or reason

    def reason(self) -> str:
        """The signal's name for the log line ("SIGTERM", "SIGINT" or "a signal on another process")."""
        return self.received or "a signal on another process"

    def restore_handler(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
