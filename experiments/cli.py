"""What every command-line job shares: one-line usage errors with exit status 2, and quiet library logs.

Rule for all jobs in `experiments/`: bad input (an unknown or malformed flag, a missing required flag, an
unknown config key, a value the job cannot use) prints ONE line `error: ...` on stderr naming the problem
and the fix, and exits with status 2 before anything is written. absl jobs start with `run_absl(main)`,
argparse jobs build their parser with `ArgumentParser`.

Quiet logs: absl prints every INFO record of every library. Two are noise on every run: jax's "Unable to
initialize backend 'tpu'" on machines without a TPU, and Orbax's per-save/restore chatter (~30 lines
before an `evaluate` result). Both loggers keep their warnings and errors.
"""

import argparse
import logging as std_logging
import re
import sys
from typing import NoReturn

from absl import app, flags, logging

USAGE_ERROR = 2


def usage_error(message: object) -> NoReturn:
    """Prints `error: <message>` as one line on stderr and exits with status 2."""
    print("error: " + " ".join(str(message).split()), file=sys.stderr)
    sys.exit(USAGE_ERROR)


def quiet_library_logs() -> None:
    """Drops INFO records of jax's backend probe and of Orbax from the absl log (warnings and errors stay)."""
    std_logging.getLogger("jax._src.xla_bridge").setLevel(std_logging.WARNING)

    def keep(record):
        return record.levelno >= std_logging.WARNING or "/orbax/" not in record.pathname

    logging.get_absl_handler().addFilter(keep)


def parse_absl_flags(argv: list[str]) -> list[str]:
    """absl flag parsing with one-line errors (exit 2), including an override of a config key that the
    config does not have (ml_collections raises AttributeError / KeyError with nested reprs)."""
    try:
        return flags.FLAGS(argv)
    except (AttributeError, KeyError) as error:
        detail = re.sub(r"[\\'\"]+", "", re.sub(r"(\\+n)+", " ", str(error))).strip()
        usage_error(
            f"unknown config key: {detail}; the schema is in apertus_jax/train/config.py "
            "(data.pipeline: apertus_jax/data/config.py)"
        )
    except (flags.Error, OSError) as error:
        usage_error(f"{error} (see --helpshort)")


def run_absl(main) -> None:
    """`app.run(main)` with `parse_absl_flags`, quiet library logs, and `app.UsageError` as one line and
    exit 2."""

    def main_with_usage_errors(argv):
        quiet_library_logs()
        try:
            return main(argv)
        except app.UsageError as error:
            usage_error(error)

    app.run(main_with_usage_errors, flags_parser=parse_absl_flags)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the project's rule: a usage error is one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        usage_error(f"{message} (see {self.prog} --help)")
