"""The one entry point of every command-line job in `experiments/`: flags, logs, the XLA cache, errors.

Every script defines its absl flags at module level, holds no library code (its work is a function of
`apertus_jax.jobs` or of a library module) and ends with `cli.execute(main)`. `execute` gives every job the same
behaviour:

- bad input (an unknown or malformed flag, a missing required flag, an unknown config key, a value the job
  cannot use, a missing file) prints ONE line `error: ...` on stderr naming the problem and the fix, and
  exits with status 2 before anything is written: `main` raises `ValueError`, `OSError` (a missing file
  included), `WorkdirLockedError` or `app.UsageError`;
- a job that needs an optional extra (`apertus_jax.extras`) calls `require_extras` before importing it: without
  the extra, one line naming the extra to install and exit status 2;
- a Ctrl-C prints one line and exits with status 130: before the trainer took over at once, after it once the
  trainer saved the step in progress (`apertus_jax.train.loop.PreemptionSignal`; a second Ctrl-C stops at once);
- short log lines, `I 10:42:07 message` (level and time; `--log_format=absl` gives absl's full prefix with
  date, thread, file and line); the log goes to stderr, so stdout holds only a job's result lines;
- quiet library logs: absl prints every INFO record of every library; jax's "Unable to initialize backend
  'tpu'" on machines without a TPU and Orbax's per-save/restore chatter are dropped (their warnings stay);
  both are `apertus_jax.logs.show_progress`, which a Python program calls to log as the commands do;
- an exception raised while a config file is executed or its `get_config()` runs is one line naming the
  file and line (`error: configs/x.py:12: NameError: name 'foo' is not defined`), exit status 2
  (`apertus_jax.config.schema.load_module`, `call_config`);
- `--config=PATH` names a config file relative to the working directory or, when it is not there, to the
  repository (`CONFIG_ROOT`: `--config=configs/runs/tiny_demo.py` works from any directory; a job that loads
  its file itself finds it with `config_file`);
- with `compilation_cache=True`, the persistent XLA compilation cache (default ~/.cache/apertus_jax/xla;
  JAX_COMPILATION_CACHE_DIR overrides), so a restarted or resumed job skips recompiling its train step.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import sys
from collections.abc import Callable
from typing import NoReturn

import jax
from absl import app, flags, logging
from ml_collections import config_flags

from apertus_jax import extras, logs
from apertus_jax.cache import cache_dir
from apertus_jax.config.fields import config_fields, format_fields
from apertus_jax.config.schema import (
    apply_preset_override,
    base_config,
    call_config,
    closest_keys,
    fit_schedule_to_steps,
    key_paths,
    load_module,
    overridden_keys,
    parse,
    set_on_command_line,
)
from apertus_jax.train.checkpoint import WorkdirLockedError, check_workdir_usable
from apertus_jax.train.loop import INTERRUPTED

USAGE_ERROR = 2

HELP_FLAGS = {"--help", "-help", "-h", "-?", "--helpshort", "--helpfull", "--helpxml"}

# Flags this module defines for a job (`define_config`, `define_run_config`) are the job's own: `--help`
# lists them with the job's flags.
flags.disclaim_key_flags()


def usage_error(message: object) -> NoReturn:
    """Prints `error: <message>` as one line on stderr and exits with status 2."""
    print("error: " + " ".join(str(message).split()), file=sys.stderr)
    sys.exit(USAGE_ERROR)


def require_extras(*names: str) -> None:
    """Checks that the optional extras `names` (keys of `apertus_jax.extras.MODULES`) are installed; else
    one line naming the extra to install and exit 2. Called at a job's start, before it imports them."""
    job = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    for name in names:
        try:
            extras.require(name, job)
        except ValueError as error:
            usage_error(error)


def enable_compilation_cache() -> None:
    """The persistent XLA compilation cache (module docstring)."""
    if not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", os.path.join(cache_dir(), "xla"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


_config_file_flag = False  # whether this job's --config names a config file (`define_config`), not a preset
# The folder that holds the repository's `configs/` (the checkout, or site-packages for a plain install).
CONFIG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config_arg(argv: list[str]) -> str | None:
    """The `PATH[:ARG]` of `--config=PATH[:ARG]` in `argv`, or None."""
    values = [a.split("=", 1)[1] for a in argv if a.startswith("--config=")]
    return values[-1] if values else None


def resolve_config(arg: str) -> str | None:
    """`PATH[:ARG]` with PATH as found: relative to the working directory, else to `CONFIG_ROOT` (absolute
    then); None when neither holds the file."""
    path, colon, config_arg = arg.partition(":")
    if os.path.isfile(path):
        return arg
    in_repository = os.path.join(CONFIG_ROOT, path)
    if not os.path.isabs(path) and os.path.isfile(in_repository):
        return in_repository + colon + config_arg
    return None


def config_file(arg: str) -> str:
    """The `--config` file of a job that loads it itself (an ablation or long-context file), found as
    `resolve_config` finds it.

    Raises:
      ValueError: in neither place (one line with the closest config files).
    """
    resolved = resolve_config(arg)
    if resolved is None:
        raise ValueError(_missing_config(arg))
    return resolved


def _missing_config(arg: str) -> str:
    """The one-line message of a `--config` file that is in neither place, with the closest config files."""
    path = arg.partition(":")[0]
    root = os.path.join(CONFIG_ROOT, "configs")
    known = sorted(
        os.path.relpath(os.path.join(folder, name), CONFIG_ROOT)
        for folder, _, names in os.walk(root)
        for name in names
        if name.endswith(".py") and name != "__init__.py"
    )
    close = difflib.get_close_matches(path, known, n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return (
        f"--config={arg}: {path} is not a file here nor under {CONFIG_ROOT}; {hint}"
        f"the repository's configs are in {root}/"
    )


def _unknown_key(argv: list[str], error: Exception, default: str | None = None) -> str:
    """The one-line message of an override of a key that the config does not have, with the closest keys
    of the config's schema (any section) and where its keys are defined: the run config schema, or the
    config file of another kind of config (a preparation or study config); `default` is the config file
    when `argv` names none."""
    arg = _config_arg(argv) or default
    path = "apertus_jax/config/schema.py"
    try:
        if arg is None:
            config = base_config()
        else:
            file, _, config_arg = arg.partition(":")
            config = call_config(load_module(file), "get_config", *([config_arg] if config_arg else []))
            if not set(base_config().keys()) <= set(config.keys()):  # not a run config's sections
                path = os.path.relpath(file, CONFIG_ROOT) if file.startswith(CONFIG_ROOT + os.sep) else file
        known = key_paths(config)
    except Exception:  # noqa: BLE001 - the config itself is broken: report ml_collections' own words
        detail = re.sub(r"[\\'\"]+", "", re.sub(r"(\\+n)+", " ", str(error))).strip()
        return f"unknown config key: {detail}; the schema is in apertus_jax/config/schema.py"
    overrides = overridden_keys(argv)
    unknown = next((key for key in overrides if key not in known), "?")
    close = closest_keys(unknown, known)
    hint = f"; did you mean --config.{' or --config.'.join(close)}?" if close else ""
    return f"unknown config key {unknown}{hint} (the keys: {path})"


def _parse_flags(argv: list[str]) -> list[str]:
    """absl flag parsing with one-line errors (exit 2): a missing config file, an override of a key that the
    config does not have (ml_collections raises AttributeError / KeyError with nested reprs), a bad flag."""
    arg = _config_arg(argv) if _config_file_flag else None
    if arg is not None:
        resolved = resolve_config(arg)
        if resolved is None:
            usage_error(_missing_config(arg))
        argv = [f"--config={resolved}" if a == f"--config={arg}" else a for a in argv]
        sys.argv[:] = argv
    try:
        return flags.FLAGS(argv)
    except SystemExit as stop:  # absl ends --help with status 1; help that was asked for is a success
        if stop.code == 1 and HELP_FLAGS & {a.split("=")[0] for a in argv[1:]}:
            sys.exit(0)
        raise
    except (AttributeError, KeyError) as error:
        usage_error(_unknown_key(argv, error))
    except (flags.Error, OSError) as error:
        key = re.search(r"Unknown command line flag 'config\.([\w.]+)'", str(error))
        if key and "set" in flags.FLAGS:  # a job whose config keys are set by --set (experiments.ablate)
            usage_error(f"{error}: this command sets a config key with --set={key.group(1)}=VALUE")
        usage_error(f"{error} (see --helpshort)")


def execute(main: Callable[[list[str]], object], *, compilation_cache: bool = False) -> None:
    """Runs `main(argv)` as the job's command (module docstring); its return value is ignored."""
    log_format = flags.DEFINE_enum(
        "log_format",
        "short",
        list(logs.LOG_FORMATS),
        "Log lines: 'I 10:42:07 message', or absl's full prefix.",
    )

    def job(argv):
        logs.show_progress(log_format.value)
        if _run_config is not None and flags.FLAGS.config_fields:
            fitted = _apply_overrides(_run_config.value)
            if fitted:
                logging.info(fitted)
            print(format_fields(config_fields(_run_config.value)))
            return
        if compilation_cache:
            enable_compilation_cache()
        try:
            main(argv)
        except (ValueError, OSError, WorkdirLockedError, app.UsageError) as error:
            usage_error(error)
        except KeyboardInterrupt as interrupt:
            # After the trainer's clean stop its message names the step saved; before it, nothing was.
            done = str(interrupt) or "stopped at once"
            print(f"interrupted: {done}; rerun the same command to continue", file=sys.stderr)
            sys.exit(INTERRUPTED)

    app.run(job, flags_parser=_parse_flags)


def define_config(default: str | None, help_text: str, example: str = "") -> flags.FlagHolder:
    """The `--config` flag of a config file (`--config.section.field=value` overrides, `example` one),
    shown in `--help`."""
    global _config_file_flag
    _config_file_flag = True
    if default is not None:
        default = resolve_config(default) or default
    help_text += f" Any value is overridden with --config.KEY=VALUE{f' (e.g. {example})' if example else ''}."
    holder = config_flags.DEFINE_config_file("config", None, help_text)
    flags.FLAGS["config"].parser = _ConfigFileParser()
    if default is not None:
        try:  # without --config in sys.argv, the default file is parsed here, with sys.argv's overrides
            flags.FLAGS.set_default("config", default)
        except (AttributeError, KeyError) as error:
            usage_error(_unknown_key(sys.argv, error, default))
    return holder


class _ConfigFileParser(flags.ArgumentParser):
    """The parser of `--config=PATH[:ARG]` in place of ml_collections' own: the file's `get_config(ARG)`, loaded
    and called by the config layer's `load_module` and `call_config`, locked. An exception raised in the file
    is one line naming its file and line, exit status 2, as is a file without `get_config` or a `get_config`
    that takes no ARG (or needs one)."""

    def parse(self, path):
        file, colon, config_arg = path.partition(":")
        args = (config_arg,) if colon else ()
        try:
            module = load_module(file)
            get_config = getattr(module, "get_config", None)
            if not callable(get_config):
                raise ValueError(
                    f"--config={path}: {file} defines no get_config(); a config file defines get_config() "
                    "returning its config (e.g. configs/runs/tiny_demo.py)"
                )
            try:
                inspect.signature(get_config).bind(*args)
            except TypeError:
                fix = f"drop ':{config_arg}'" if args else f"give it as --config={file}:ARG"
                raise ValueError(
                    f"--config={path}: {file} takes {'no' if args else 'an'} argument; {fix}"
                ) from None
            config = call_config(module, "get_config", *args)
        except ValueError as error:
            usage_error(error)
        if callable(getattr(config, "lock", None)):
            config.lock()
        return config

    def flag_type(self) -> str:
        return "config object"


class _IntegerListParser(flags.ListParser):
    """A comma-separated list of integers; anything else is absl's one-line `flag --NAME=VALUE: ...` error."""

    def parse(self, argument):
        try:
            return [int(value) for value in super().parse(argument)]
        except ValueError:
            raise ValueError("give comma-separated integers, e.g. 4,50") from None

    def flag_type(self) -> str:
        return "comma separated list of integers"


def define_integer_list(name: str, default: list[int], help_text: str) -> flags.FlagHolder:
    """A flag `--NAME=1,2,3` whose value is a list of ints, checked when the flags are parsed: a value that is
    not one (`--k=abc`) is one line naming the flag, exit 2."""
    return flags.DEFINE(
        _IntegerListParser(), name, default, help_text, serializer=flags.CsvListSerializer(",")
    )


_run_config: flags.FlagHolder | None = None  # the `--config` of a run config (`define_run_config`)


def define_run_config(default: str) -> flags.FlagHolder:
    """The `--config` flag of a run config (the `base_config()` schema) and `--config_fields`, which prints
    every `--config.*` field with its value in this config, type, range and meaning and exits
    (`apertus_jax.config.fields`); both shown in `--help`."""
    global _run_config
    _run_config = define_config(
        default,
        "Run config: a Python file such as configs/runs/tiny_demo.py (from this directory or the "
        "repository), or PATH:ARG for a config that takes an argument.",
        "--config.train.steps=100; --config_fields lists every KEY",
    )
    flags.DEFINE_bool(
        "config_fields", False, "List every --config.* field: its value here, type, range, meaning; exit."
    )
    return _run_config


def _apply_overrides(config) -> str | None:
    """What command-line overrides mean beyond their values: `--config.model.preset=NAME` (the preset's model
    section, the other `--config.model.*` overrides on top) and `--config.train.steps=N` alone (the schedule
    follows it; `apertus_jax.config.schema.fit_schedule_to_steps`). Returns the line for the log that says so,
    or None."""
    apply_preset_override(config, sys.argv)
    return fit_schedule_to_steps(config, overridden_keys(sys.argv))


def parsed_config(holder: flags.FlagHolder):
    """The typed `apertus_jax.config.schema.Config` of the `--config` flag with its overrides' meanings applied
    (`_apply_overrides`; their line is logged once the config is valid, so a bad one is one line alone).

    Raises:
      ValueError: an invalid config (one line; a message that starts with a config key names it as the flag
        that sets it, `--config.model.n_layers`, or as the config file's `config.model.n_layers` when no flag
        does).
    """
    fitted = _apply_overrides(holder.value)
    try:
        config = parse(holder.value)
    except ValueError as error:
        message = str(error)
        key = re.match(r"[a-z_]+(\.[a-z_0-9]+)+", message)
        if key and key.group(0) in key_paths(holder.value):
            message = ("--config." if set_on_command_line(key.group(0), sys.argv) else "config.") + message
        raise ValueError(message) from None
    if fitted:
        logging.info(fitted)
    return config


def check_output_file(path: str, flag: str) -> None:
    """Checks, before a job works, that it can write its output file `path` (flag `flag`): an existing file is
    replaced at the end; a missing one is probed as `check_workdir_usable` probes a workdir (a folder on the
    way that is a file, a read-only or pseudo file system).

    Raises:
      ValueError: one line naming the flag, the problem and the fix.
    """
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path} is a directory; pass {flag}= a file name")
    if not os.path.exists(path):
        check_workdir_usable(path, flag)


def print_run_status(status: str, workdir: str) -> None:
    """The last line of a training command on stdout: `run done: WORKDIR` (or `run preempted: WORKDIR`)."""
    print(f"run {status}: {workdir}")


def required(**values) -> None:
    """Raises ValueError naming the first flag of `values` ({name: value}) that is empty."""
    for name, value in values.items():
        if value in (None, ""):
            raise ValueError(f"--{name} is required")
