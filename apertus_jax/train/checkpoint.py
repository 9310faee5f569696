"""Checkpoints of the training run with Orbax: async saves, keep-N, restore onto any mesh, a workdir lock.

One checkpoint step holds four items (an `ocp.args.Composite`):
- `params`: the parameter arrays (Orbax/TensorStore, each process writes its shards);
- `opt_state`: the optimizer state arrays, likewise;
- `data_iter`: the Grain iterator state (`grain.checkpoint.CheckpointSave`, one JSON file per process);
- `meta`: JSON with the layout name (`FORMAT`), step, tokens consumed, fault counters, the seed and the
  shapes of the parameters and of the optimizer state.

Parameters are an item of their own, so evaluation, export and fine-tuning restore them alone
(`restore_latest_params`) without building an optimizer or reading its state; a fresh run starts from another
workdir's (`workdir_params`, the default `InitialParams` of `checkpoint.init_from`). Restoring passes abstract
targets (`jax.ShapeDtypeStruct` with the CURRENT mesh's NamedSharding), so a run may resume on a different
mesh shape or device count (Orbax restores each array onto the sharding of its target). A checkpoint of
another layout, model or optimizer state is refused with one line, never set aside or overwritten; an
unreadable one is set aside by the trainer and left in place by the jobs that only read a workdir.
"""

import contextlib
import dataclasses
import fcntl
import gc
import glob
import inspect
import logging as std_logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import grain
import jax
import orbax.checkpoint as ocp
from absl import logging
from jax.experimental import multihost_utils

from apertus_jax.train.batches import DataStateMismatchError

FORMAT = "apertus_jax/params+opt_state"


class WorkdirLockedError(RuntimeError):
    """Another live process holds the workdir."""


class WorkdirLock:
    """An exclusive `flock` on WORKDIR/.lock-p{process_index}; released by the OS even after kill -9.

    Raises:
      WorkdirLockedError: another process holds the lock (two runs cannot write the same workdir).
    """

    def __init__(self, workdir: str):
        os.makedirs(workdir, exist_ok=True)
        self.path = os.path.join(workdir, f".lock-p{jax.process_index()}")
        self._file = None

    def __enter__(self):
        self._file = open(self.path, "a+")
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.close()
            raise WorkdirLockedError(
                f"workdir {os.path.dirname(self.path)} is in use by another run ({self.path} is locked); "
                "wait for it to finish or pass a different --workdir"
            ) from None
        return self

    def __exit__(self, *exc):
        fcntl.flock(self._file, fcntl.LOCK_UN)
        self._file.close()

    @staticmethod
    def held(workdir: str) -> bool:
        """Whether a live process holds a lock of `workdir` (one of its `.lock-p<N>` files): tested with a
        non-blocking shared lock released at once, never waited for or kept."""
        for path in glob.glob(os.path.join(glob.escape(workdir), ".lock-p*")):
            try:
                with open(path) as f:
                    fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    fcntl.flock(f, fcntl.LOCK_UN)
            except BlockingIOError:
                return True
            except OSError:  # gone or unreadable: no lock to test
                continue
        return False


def hf_checkpoint_file(workdir: str) -> str | None:
    """The first `*.safetensors` file of a folder that holds a HF checkpoint and no run (no `checkpoints/`): an
    `export_hf` output or a downloaded model, whose `config.json` is HF's; None for any other folder."""
    if os.path.isdir(os.path.join(workdir, "checkpoints")):
        return None
    weights = sorted(glob.glob(os.path.join(glob.escape(workdir), "*.safetensors")))
    return os.path.basename(weights[0]) if weights else None


def tree_shapes(tree) -> dict[str, list[int]]:
    """Flat {"path/to/leaf": shape} of a tree of arrays or ShapeDtypeStructs (parameters, optimizer state)."""
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {
        jax.tree_util.keystr(path, simple=True, separator="/"): list(jax.numpy.shape(leaf))
        for path, leaf in flat
    }


def describe_model(shapes: dict[str, list[int]]) -> str:
    """The model of a `tree_shapes` record of its parameters in words: layers, d_model, heads, MLP width,
    vocabulary.

    Reads the Apertus parameter names (`embed` [V, D]; `layers/<i>/...` unscanned, or `layers/...` with a
    leading layer axis when scanned); a field whose parameter is absent is left out.
    """
    words = []
    layer_indices = {name.split("/")[1] for name in shapes if re.match(r"layers/\d+/", name)}
    scanned = "layers/attn/q_proj" in shapes
    if layer_indices or scanned:
        count = len(layer_indices) if layer_indices else shapes["layers/attn/q_proj"][0]
        words.append(f"{count} layer{'s' if count != 1 else ''}")
    prefix = "layers/attn/" if scanned else "layers/0/attn/"
    trim = 1 if scanned else 0  # the leading layer axis of scanned parameters
    if "embed" in shapes:
        words.append(f"d_model {shapes['embed'][1]}")
    if prefix + "q_proj" in shapes and prefix + "k_proj" in shapes:
        _, heads, head_dim = shapes[prefix + "q_proj"][trim:]
        words.append(f"{heads} query and {shapes[prefix + 'k_proj'][trim + 1]} KV heads of {head_dim}")
    mlp = prefix.replace("attn/", "mlp/up")
    if mlp in shapes:
        words.append(f"MLP width {shapes[mlp][-1]}")
    if "embed" in shapes:
        words.append(f"a {shapes['embed'][0]}-id vocabulary")
    return ", ".join(words) or f"{len(shapes)} parameters"


def _first_difference(saved: dict[str, list[int]], current: dict[str, list[int]], missing: str) -> str:
    """ "name: checkpoint AxB, config CxD" of the first entry (by name) whose shape differs."""
    name = next(n for n in sorted(set(saved) | set(current)) if saved.get(n) != current.get(n))

    def shape(shapes):
        return ("x".join(map(str, shapes[name])) or "a scalar") if name in shapes else missing

    return f"{name}: checkpoint {shape(saved)}, config {shape(current)}"


def check_same_model(saved: dict[str, list[int]], current: dict[str, list[int]], where: str) -> None:
    """Raises ValueError saying, in words, which model the checkpoint holds and which the config asks for,
    and the first parameter that differs."""
    if saved == current:
        return
    raise ValueError(
        f"{where} holds a checkpoint of another model: the checkpoint has {describe_model(saved)}; the config "
        f"asks for {describe_model(current)} (first difference: "
        f"{_first_difference(saved, current, 'no such parameter')}); use the model config the checkpoint was "
        "trained with, or another workdir"
    )


def check_same_optimizer(saved: dict[str, list[int]], current: dict[str, list[int]], where: str) -> None:
    """Raises ValueError when the optimizer state of a checkpoint (`tree_shapes`) is not the one the config
    builds (another optimizer, or settings that add or drop state), naming the first entry that differs;
    `where` is the checkpoint directory, WORKDIR/checkpoints."""
    if saved == current:
        return
    raise ValueError(
        f"{where} holds the optimizer state of other optimizer settings: {len(saved)} state arrays in the "
        f"checkpoint, {len(current)} for the config (first difference: "
        f"{_first_difference(saved, current, 'no such entry')}); rerun with the settings it was trained with "
        "(its config file and overrides, recorded in the workdir's config.json), or start a new --workdir "
        f"from its parameters with --config.checkpoint.init_from={os.path.dirname(where)}"
    )


def _first_line(error: BaseException) -> str:
    """An error message's first line without TensorStore's pointer to details, at most 200 characters."""
    return (str(error).splitlines() or [""])[0].split(" See full TensorStore details")[0][:200]


def _unreadable(directory: str, step: int, error: BaseException) -> str:
    """ "checkpoint STEP in DIRECTORY is unreadable (TYPE: first line of the error)"."""
    return f"checkpoint {step} in {directory} is unreadable ({type(error).__name__}: {_first_line(error)})"


def _chain(error: BaseException | None) -> Iterator[BaseException]:
    """`error`, then the exceptions it was raised from or during, each once."""
    seen = set()
    while error is not None and id(error) not in seen:
        yield error
        seen.add(id(error))
        error = error.__cause__ or error.__context__


def _raised_from(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    """`error` or the first exception it was raised from or during that is a `kind`, else None."""
    return next((e for e in _chain(error) if isinstance(e, kind)), None)


def _names(error: BaseException | None, path: str) -> bool:
    """Whether `error` or an exception it was raised from or during names a file under `path`."""
    return any(os.path.join(path, "") in str(e) for e in _chain(error))


def _late_read_failure(unraisable, path: str) -> bool:
    """Whether an unraisable exception is the trace of a failed read under `path`: an unfinished read collected
    ("Exception ignored in: <coroutine ...>", its error naming the file), or the callback of a read that
    TensorStore finished after Orbax had closed its event loop ("RuntimeError: Event loop is closed")."""
    error = unraisable.exc_value
    if inspect.iscoroutine(unraisable.object):
        return _names(error, path)
    return isinstance(error, RuntimeError) and str(error) == "Event loop is closed"


class _ReadsOf(std_logging.Filter):
    """A filter of the "asyncio" logger that drops its reports of failed tasks whose error names a file under
    `path`, and keeps every other."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def filter(self, record: std_logging.LogRecord) -> bool:
        return not _names(record.exc_info[1] if record.exc_info else None, self.path)


@contextlib.contextmanager
def _failed_reads_unreported(path: str) -> Iterator[None]:
    """Orbax reads a checkpoint with one asyncio task per array. When reads fail, the restore raises and the
    failure is reported once, by `Checkpointer._set_aside`; but every other failed read would be reported too,
    with a traceback, whenever it is collected or finishes (during this restore, later, or at exit): an
    unfinished read makes Python print "Exception ignored in: <coroutine ...>", a read finished after Orbax closed
    its event loop "RuntimeError: Event loop is closed" (`_late_read_failure`), a failed task nobody retrieved
    makes asyncio's logger print "Task exception was never retrieved" (`_ReadsOf`). These reports of reads under
    `path` (the checkpoint directory) are dropped while the restore runs and, if it failed, for the rest of the
    process; every other report stays."""
    previous = sys.unraisablehook

    def hook(unraisable):
        if not _late_read_failure(unraisable, path):
            previous(unraisable)

    reads, asyncio_log = _ReadsOf(path), std_logging.getLogger("asyncio")
    sys.unraisablehook = hook
    asyncio_log.addFilter(reads)
    try:
        yield
    except BaseException:
        gc.collect()  # collect the unfinished reads now
        raise
    sys.unraisablehook = previous
    asyncio_log.removeFilter(reads)


class Checkpointer:
    """Orbax CheckpointManager over WORKDIR/checkpoints.

    Args:
      directory: the checkpoint root (created if missing, unless `read_only`).
      keep: how many recent checkpoints to keep (keep-N).
      async_save: write arrays in a background thread; the step continues while they are written.
      read_only: a reader of another job's checkpoints: an unreadable checkpoint is skipped and left where it
        is (`restore_workdir_params` reports it); the trainer sets it aside with a warning (`restore_latest`).
        Either way it is listed in `unreadable` ((step, error), newest first).
    """

    def __init__(self, directory: str, keep: int, async_save: bool = True, read_only: bool = False):
        self.directory = os.path.abspath(directory)
        self.read_only = read_only
        self.unreadable: list[tuple[int, Exception]] = []
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=keep,
                enable_async_checkpointing=async_save,
                create=not read_only,
            ),
        )

    def all_steps(self) -> list[int]:
        return sorted(self.manager.all_steps())

    def save(self, step: int, state: dict[str, Any], data_iter, meta: dict[str, Any]) -> None:
        """Starts saving `state` ({"params", "opt_state"}), the data iterator state and `meta` at `step`."""
        self.manager.save(
            step,
            force=True,
            args=ocp.args.Composite(
                params=ocp.args.StandardSave(state["params"]),
                opt_state=ocp.args.StandardSave(state["opt_state"]),
                data_iter=grain.checkpoint.CheckpointSave(data_iter),
                meta=ocp.args.JsonSave(
                    {**meta, "opt_state_shapes": tree_shapes(state["opt_state"]), "format": FORMAT}
                ),
            ),
        )

    def wait(self) -> None:
        """Blocks until pending async saves are committed."""
        self.manager.wait_until_finished()

    def read_meta(self, step: int) -> dict[str, Any]:
        return self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]

    def restore_latest(self, abstract_state, data_iter=None) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """Restores the newest readable checkpoint; returns (state, meta) or None if there is none.

        A checkpoint that fails to restore (corrupt or incomplete files) is moved to
        `<directory>_corrupt/<step>` with a warning (left in place if `read_only`), and the previous one is
        tried.

        Args:
          abstract_state: {"params", "opt_state"} of `jax.ShapeDtypeStruct` with the target shardings.
          data_iter: the Grain iterator to set to the saved position, or None to leave it where it is
            (a rollback skips the data window that produced non-finite steps).

        Raises:
          ValueError: the checkpoint holds a model of different parameter shapes, the optimizer state of other
            optimizer settings (`check_same_optimizer`), or is of another layout (nothing is modified).
        """
        items = {
            "params": ocp.args.StandardRestore(abstract_state["params"]),
            "opt_state": ocp.args.StandardRestore(abstract_state["opt_state"]),
        }
        reset = None
        if data_iter is not None:
            items["data_iter"] = grain.checkpoint.CheckpointRestore(data_iter)
            # A checkpoint that fails after its data position was restored must not leave the iterator there.
            start = data_iter.get_state()
            reset = lambda: data_iter.set_state(start)  # noqa: E731
        restored = self._restore_newest(abstract_state["params"], items, abstract_state["opt_state"], reset)
        if restored is None:
            return None
        items, meta = restored
        return {"params": items["params"], "opt_state": items["opt_state"]}, meta

    def restore_latest_params(self, abstract_params) -> tuple[Any, dict[str, Any]] | None:
        """The newest readable checkpoint's parameters alone (the optimizer state is not read); returns
        (params, meta) or None if there is no checkpoint. Unreadable ones are skipped as in `restore_latest`.

        Raises:
          ValueError: a model of different parameter shapes, or a checkpoint of another layout.
        """
        restored = self._restore_newest(
            abstract_params, {"params": ocp.args.StandardRestore(abstract_params)}
        )
        return None if restored is None else (restored[0]["params"], restored[1])

    def _restore_newest(
        self, abstract_params, items: dict, abstract_opt_state=None, reset: Callable[[], None] | None = None
    ) -> tuple[dict, dict] | None:
        for step in reversed(self.all_steps()):
            try:
                meta = self.read_meta(step)
            except Exception as e:  # noqa: BLE001 - any failure to read means "unusable checkpoint"
                self._set_aside(step, e)
                continue
            if meta.get("format") != FORMAT:
                raise ValueError(
                    f"checkpoint {step} in {self.directory} has another layout ({meta.get('format', 'unnamed')}, "
                    f"this version reads {FORMAT}); use a new --workdir, or the apertus_jax version that wrote it"
                )
            check_same_model(meta["param_shapes"], tree_shapes(abstract_params), self.directory)
            if abstract_opt_state is not None and "opt_state_shapes" in meta:  # recorded since 2026-12
                check_same_optimizer(
                    meta["opt_state_shapes"], tree_shapes(abstract_opt_state), self.directory
                )
            try:
                with _failed_reads_unreported(os.path.join(self.directory, str(step))):
                    restored = self.manager.restore(step, args=ocp.args.Composite(**items))
            except Exception as e:  # noqa: BLE001
                if mismatch := _raised_from(e, DataStateMismatchError):
                    raise ValueError(
                        f"checkpoint {step} in {self.directory} holds the data position of other data "
                        f"settings ({_first_line(mismatch)}); rerun with the settings it was trained with "
                        "(its config file and overrides, recorded in the workdir's config.json), or train in "
                        "another workdir"
                    ) from None
                self._set_aside(step, e)
                if reset is not None:
                    reset()
                continue
            return restored, meta
        return None

    def _set_aside(self, step: int, error: Exception) -> None:
        self.unreadable.append((step, error))
        if self.read_only:
            return
        target = os.path.join(self.directory + "_corrupt", str(step))
        logging.warning(
            "%s; moved to %s, trying the previous one", _unreadable(self.directory, step, error), target
        )
        if jax.process_index() == 0:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.move(os.path.join(self.directory, str(step)), target)
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices(f"set_aside_checkpoint_{step}")
        self.manager.reload()

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()


def restore_workdir_params(workdir: str, abstract_params) -> tuple[Any, dict[str, Any]]:
    """The newest readable checkpoint's parameters of a training `workdir` (its `checkpoints/`), restored onto
    the shardings of `abstract_params`; the optimizer state is not read. Returns (params, meta). An unreadable
    checkpoint is skipped with a warning and left in place: the workdir is another job's.

    Raises:
      FileNotFoundError: `workdir` has no `checkpoints/` or no checkpoint.
      ValueError: every checkpoint is unreadable (one line naming the newest and why, no warning before it), a
        model of other parameter shapes, or a checkpoint of another layout.
    """
    directory = os.path.join(workdir, "checkpoints")
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"{workdir} has no checkpoints/: it must be a directory written by "
            "`python -m experiments.pretrain --workdir=...`"
        )
    checkpointer = Checkpointer(directory, keep=1_000_000, async_save=False, read_only=True)
    try:
        restored = checkpointer.restore_latest_params(abstract_params)
    finally:
        checkpointer.close()
    if restored is None and checkpointer.unreadable:
        step, error = checkpointer.unreadable[0]
        raise ValueError(
            f"{_unreadable(checkpointer.directory, step, error)}, and no earlier one is readable: copy the "
            "workdir again from where it was written, or give a workdir whose checkpoints are whole"
        )
    if restored is None:
        raise FileNotFoundError(
            f"no readable checkpoint under {directory}; train first (`python -m experiments.pretrain "
            f"--workdir={workdir}`)"
        )
    for step, error in checkpointer.unreadable:
        logging.warning(
            "%s; left in place (this job only reads it), read step %d instead",
            _unreadable(checkpointer.directory, step, error),
            restored[1]["progress"]["step"],
        )
    return restored


@dataclasses.dataclass(frozen=True)
class InitialParams:
    """The parameters a fresh run starts from instead of a random initialization (a `Run`'s `init_params`
    plug-in; continued pretraining, or a post-training run from its pretrained model). The optimizer state starts
    fresh.

    Attributes:
      check: () -> None, called before anything of the run is written.
      load: (abstract params, `jax.ShapeDtypeStruct`s with shardings) -> (params placed so, the source as the
        log names it).

    Raises (from `check` and `load`):
      FileNotFoundError / ValueError: one line naming the source, when it cannot give this run's parameters.
    """

    check: Callable[[], None]
    load: Callable[[Any], tuple[Any, str]]


def workdir_params(source: str) -> InitialParams:
    """The parameters of the newest checkpoint of the training workdir `source` (`checkpoint.init_from`)."""

    def check() -> None:
        if not os.path.isdir(os.path.join(source, "checkpoints")):
            raise FileNotFoundError(
                f"checkpoint.init_from={source} has no checkpoints/: it must be a workdir written by "
                "`python -m experiments.pretrain`, or hf:DIR for a HF checkpoint (or leave it empty)"
            )

    def load(abstract_params) -> tuple[Any, str]:
        try:
            params, meta = restore_workdir_params(source, abstract_params)
        except ValueError as e:
            raise ValueError(f"checkpoint.init_from={source}: {e}") from None
        return params, f"{source} (step {meta['progress']['step']})"

    return InitialParams(check, load)


# Is a run directory usable? Checked by the trainer CLI before JAX starts devices or builds the mesh.
#
# `os.access` is not enough: it answers "allowed" to root for any directory, and under `/proc` a directory
# can look writable while `mkdir` fails with "No such file or directory". So the check really tries what the
# run will do first: create the workdir (a probe directory next to where it will be) or a file inside an
# existing one, and removes the probe at once, leaving nothing behind.


def _nearest_existing(path: str) -> str:
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def check_workdir_usable(workdir: str, flag: str = "--workdir") -> None:
    """Raises if the run could not create or write `workdir`; writes nothing (probes are removed).

    Args:
      workdir: the run directory, existing or not (it is created later by the run); or a job's output
        directory, written at its end.
      flag: the command-line flag that names it, for the fix in the message.
    Raises:
      ValueError: one line naming the workdir, the reason and the fix: it is empty, a path component is a
        file, the workdir is not a directory, or a probe file / directory cannot be created (read-only file
        system, permissions, pseudo file systems such as /proc).
    """
    fix = f"pass {flag}= a directory you can write (or fix its permissions / mount)"
    name = "workdir" if flag == "--workdir" else flag
    if not workdir:
        raise ValueError(f"{flag} is empty; {fix}")
    path = os.path.abspath(workdir)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ValueError(f"{name} {workdir} exists and is not a directory; {fix}")
    existing = _nearest_existing(path)
    if not os.path.isdir(existing):
        raise ValueError(f"{name} {workdir} cannot be created: {existing} is a file, not a directory; {fix}")
    try:
        if existing == path:
            with tempfile.TemporaryFile(dir=path):
                pass
        else:
            os.rmdir(tempfile.mkdtemp(prefix=".workdir-probe-", dir=existing))
    except OSError as error:
        action = "is not writable" if existing == path else f"cannot be created in {existing}"
        reason = error.strerror or type(error).__name__
        raise ValueError(f"{name} {workdir} {action} ({reason}); {fix}") from None
