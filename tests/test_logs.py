"""`apertus_jax.logs.show_progress`: a Python program logs as the commands do (the commands' own lines are
checked in tests/experiments/test_cli.py)."""

import io
import logging as std_logging
import re
import sys

import pytest
from absl import logging

from apertus_jax import logs


def _plain_process(monkeypatch) -> io.StringIO:
    """The logging of a Python process outside an absl app once absl has logged a first record: one root
    handler on stderr in `basicConfig`'s format, absl's logger at WARNING; returns its stderr, a StringIO (set in
    the test itself: pytest sets its own `sys.stderr` between a fixture and the test)."""
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    basic = std_logging.StreamHandler(stderr)
    basic.setFormatter(std_logging.Formatter(std_logging.BASIC_FORMAT))
    monkeypatch.setattr(std_logging.root, "handlers", [basic])
    monkeypatch.setattr(logs, "_handlers", [])
    logging.set_verbosity(logging.WARNING)
    return stderr


@pytest.fixture(autouse=True)
def _absl_level():
    """absl's logger level as it was (`show_progress` sets it in a process outside an absl app)."""
    logger = std_logging.getLogger("absl")
    level = logger.level
    yield
    logger.setLevel(level)


def _orbax_info(message: str) -> None:
    """An INFO record as Orbax logs it through absl (from a file of its package)."""
    logger = std_logging.getLogger("absl")
    logger.handle(
        logger.makeRecord("absl", std_logging.INFO, "/site/orbax/checkpoint/x.py", 1, message, (), None)
    )


def test_a_python_program_shows_the_steps_in_the_commands_short_lines(monkeypatch):
    """Before: a run from Python showed no step at all, only warnings, as `WARNING:absl:...`."""
    stderr = _plain_process(monkeypatch)
    logging.info("step 0 | before show_progress")  # dropped, as in a fresh process
    logs.show_progress()
    logs.show_progress()  # again: still one line per record
    logging.info("step 1/10 | loss 8.3513")
    _orbax_info("[process=0] Saving checkpoint at step 1")
    logging.warning("train.steps=10 ends before the cooldown")
    lines = stderr.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert re.fullmatch(r"I \d\d:\d\d:\d\d step 1/10 \| loss 8\.3513", lines[0]), lines
    assert re.fullmatch(r"W \d\d:\d\d:\d\d train\.steps=10 ends before the cooldown", lines[1]), lines
    assert std_logging.root.handlers == logs._handlers  # basicConfig's handler gave way to one of ours


def test_absl_s_full_prefix_and_an_unknown_format(monkeypatch):
    stderr = _plain_process(monkeypatch)
    logs.show_progress("absl")
    logging.info("step 1/10")
    assert re.fullmatch(
        r"I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ test_logs\.py:\d+\] step 1/10\n", stderr.getvalue()
    )
    with pytest.raises(ValueError, match="log_format='json': use one of short, absl"):
        logs.show_progress("json")
