"""Checkpoints of the training run with Orbax: async saves, keep-N, restore onto any mesh, a workdir lock.

One checkpoint step holds three items (an `ocp.args.Composite`):
- `state`: {"params", "opt_state"} arrays (Orbax/TensorStore, each process writes its shards);
- `data_iter`: the Grain iterator state (`grain.checkpoint.CheckpointSave`, one JSON file per process);
- `meta`: JSON with step, tokens consumed, fault counters, the seed and the parameter shapes.

Restoring passes abstract targets (`jax.ShapeDtypeStruct` with the CURRENT mesh's NamedSharding), so a run
may resume on a different mesh shape or device count (Orbax restores onto the target shardings).
"""

import fcntl
import os
import shutil
from typing import Any

import grain
import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging
from jax.experimental import multihost_utils


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


def param_shapes(params) -> dict[str, list[int]]:
    """Flat {"path/to/leaf": shape} of a params tree (arrays or ShapeDtypeStructs)."""
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    return {jax.tree_util.keystr(path, simple=True, separator="/"): list(leaf.shape) for path, leaf in flat}


def check_same_model(saved: dict[str, list[int]], current: dict[str, list[int]], where: str) -> None:
    """Raises ValueError naming the first parameter whose shape differs between checkpoint and config."""
    if saved == current:
        return
    for name in sorted(set(saved) | set(current)):
        if saved.get(name) != current.get(name):
            raise ValueError(
                f"{where} holds a checkpoint of a different model shape ({name}: checkpoint "
                f"{saved.get(name)}, config {current.get(name)}); use a new --workdir or the matching config"
            )


class Checkpointer:
    """Orbax CheckpointManager over WORKDIR/checkpoints.

    Args:
      directory: the checkpoint root (created if missing).
      keep: how many recent checkpoints to keep (keep-N).
      async_save: write arrays in a background thread; the step continues while they are written.
    """

    def __init__(self, directory: str, keep: int, async_save: bool = True):
        self.directory = os.path.abspath(directory)
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=keep, enable_async_checkpointing=async_save, create=True
            ),
        )

    def all_steps(self) -> list[int]:
        return sorted(self.manager.all_steps())

    def save(self, step: int, state: dict[str, Any], data_iter, meta: dict[str, Any]) -> None:
        """Starts saving `state` (params, opt_state), the data iterator state and `meta` at `step`."""
        self.manager.save(
            step,
            force=True,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(state),
                data_iter=grain.checkpoint.CheckpointSave(data_iter),
                meta=ocp.args.JsonSave(meta),
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
        `<directory>_corrupt/<step>` with a warning, and the previous one is tried.

        Args:
          abstract_state: {"params", "opt_state"} of `jax.ShapeDtypeStruct` with the target shardings.
          data_iter: the Grain iterator to set to the saved position, or None to leave it where it is
            (a rollback skips the data window that produced non-finite steps).

        Raises:
          ValueError: the checkpoint holds a model of different parameter shapes (nothing is modified).
        """
        for step in reversed(self.all_steps()):
            try:
                meta = self.read_meta(step)
            except Exception as e:  # noqa: BLE001 - any failure to read means "unusable checkpoint"
                self._set_aside(step, e)
                continue
            check_same_model(meta["param_shapes"], param_shapes(abstract_state["params"]), self.directory)
            items = {"state": ocp.args.StandardRestore(abstract_state)}
            if data_iter is not None:
                items["data_iter"] = grain.checkpoint.CheckpointRestore(data_iter)
            try:
                restored = self.manager.restore(step, args=ocp.args.Composite(**items))
            except Exception as e:  # noqa: BLE001
                self._set_aside(step, e)
                continue
            return restored["state"], meta
        return None

    def _set_aside(self, step: int, error: Exception) -> None:
        target = os.path.join(self.directory + "_corrupt", str(step))
        logging.warning(
            "checkpoint %d in %s is unreadable (%s: %s); moved to %s, trying the previous one",
            step,
            self.directory,
            type(error).__name__,
            str(error).splitlines()[0][:200],
            target,
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


def abstract_like(tree, shardings):
    """ShapeDtypeStructs with the given shardings: restore targets that allocate nothing."""
    return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=s), tree, shardings)
