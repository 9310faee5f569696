"""The log of a run as the commands print it, for training from Python too.

    from apertus_jax import logs

    logs.show_progress()  # then apertus_jax.train.loop.train(...) logs its start-up and one line per step

The trainer and the jobs log through absl: INFO records say what takes time before step 1 and give one line per
step, WARNING records what to fix. A command of `experiments/` shows them (its absl app installs absl's
handler, and `experiments/cli.py` calls `show_progress`); a plain Python process shows only the warnings, as
`WARNING:absl:...`, until it calls `show_progress`. `counted(n, noun)` words a count in a line ("1 layer",
"2 layers").
"""

from __future__ import annotations

import logging as std_logging
import sys

from absl import logging

# The short log line: level initial and local time, `I 10:42:07 message`.
SHORT_FORMAT = std_logging.Formatter("%(levelname).1s %(asctime)s %(message)s", "%H:%M:%S")
LOG_FORMATS = ("short", "absl")
# The stderr handler of a process without absl's app (made by the first `show_progress`).
_handlers: list[std_logging.Handler] = []


def _not_library_chatter(record: std_logging.LogRecord) -> bool:
    """Drops Orbax's INFO records (a few lines per checkpoint saved or restored); warnings and errors stay."""
    return record.levelno >= std_logging.WARNING or "/orbax/" not in record.pathname


def show_progress(log_format: str = "short") -> None:
    """Shows the log on stderr as the commands do: absl's INFO records and above, each as `I 10:42:07 message`
    ("absl": absl's full prefix with date, thread, file and line), without jax's backend probe ("Unable to
    initialize backend 'tpu'") and Orbax's per-checkpoint lines (their warnings stay). Outside an absl app
    (a plain Python process) it also sets absl's verbosity to INFO and makes its own handler the one handler of
    the root logger on stderr (absl's app does likewise with its own); inside one, the app's handler and
    `--verbosity` are used. Calling it again only changes the format.

    Raises:
      ValueError: `log_format` is not one of `LOG_FORMATS`.
    """
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log_format={log_format!r}: use one of {', '.join(LOG_FORMATS)}")
    handler = logging.get_absl_handler()
    if (
        handler not in std_logging.root.handlers
    ):  # no absl app: absl's first record added `basicConfig`'s handler
        if not _handlers:
            _handlers.append(std_logging.StreamHandler(sys.stderr))
        handler = _handlers[0]
        for other in list(std_logging.root.handlers):  # one handler on stderr, as absl's app leaves it
            if isinstance(other, std_logging.StreamHandler) and other.stream is sys.stderr:
                std_logging.root.removeHandler(other)
        std_logging.root.addHandler(handler)
        logging.set_verbosity(logging.INFO)
    handler.setFormatter(SHORT_FORMAT if log_format == "short" else logging.PythonFormatter())
    if _not_library_chatter not in handler.filters:
        handler.addFilter(_not_library_chatter)
    std_logging.getLogger("jax._src.xla_bridge").setLevel(std_logging.WARNING)


def counted(count: int, noun: str) -> str:
    """`count` and `noun`, plural unless the count is 1: "1 layer", "2 layers", "1,024 documents"."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"
