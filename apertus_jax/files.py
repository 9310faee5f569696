"""Atomic file writes: a reader sees the old file or the whole new one, never a part.

Every file the package writes for later reading (configs, manifests, metrics rewrites, plots, caches,
checkpointed records) goes through `atomic_path`: the content is written to a temporary file in the target's
own directory (same file system, so the final `os.replace` is atomic on POSIX) and renamed over the target only
when the writer finished without an exception; on an exception the temporary file is removed and the target is
untouched. Files get the permissions a plain `open()` would give (0666 minus the umask), not the 0600 of
`tempfile`.

A directory of files that belong together (an export) is written the same way: `staged_directory` yields a
hidden staging directory beside the target, and `publish_directory` renames it into place at the end.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yields a temporary path to write; on success it replaces `path` (parent directories are created).

    The temporary name keeps the target's extension (matplotlib and others pick the format from it).

    Raises:
      OSError: the directory cannot be created or written (nothing is left behind).
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    base, extension = os.path.splitext(os.path.basename(path))
    handle, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=f".tmp{extension}", dir=directory)
    os.close(handle)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Writes `data` to `path` atomically."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Writes `text` (UTF-8) to `path` atomically."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


def write_json(path: str | os.PathLike, obj: Any, **dump_kwargs) -> None:
    """Writes `json.dumps(obj, **dump_kwargs)` to `path` atomically (`dump_kwargs` as for `json.dump`)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, **dump_kwargs)


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def publish_directory(staging: str, target: str) -> None:
    """Renames the directory `staging` to `target` (same file system); an existing `target` is moved aside
    first and removed after, so `target` is always either the old or the whole new directory, but for the
    instant between the two renames."""
    if os.path.exists(target):
        old = f"{staging}.old"
        os.rename(target, old)
        os.rename(staging, target)
        shutil.rmtree(old)
    else:
        os.rename(staging, target)


def check_replaceable(target: str | os.PathLike, *, overwrite: bool = False) -> None:
    """Checks that `staged_directory(target, overwrite=overwrite)` may write `target`.

    Raises:
      FileExistsError: `target` is a file, or a non-empty directory and not `overwrite`.
    """
    target = os.fspath(target)
    if os.path.exists(target) and not os.path.isdir(target):
        raise FileExistsError(f"{target} is a file, not a directory; choose another output directory")
    if os.path.isdir(target) and os.listdir(target) and not overwrite:
        raise FileExistsError(
            f"{target} is not empty; choose a new output directory or pass --overwrite to replace it"
        )


@contextlib.contextmanager
def staged_directory(target: str | os.PathLike, *, overwrite: bool = False) -> Iterator[str]:
    """Yields a new empty directory to fill; on success it replaces `target` (`publish_directory`), on an
    exception it is removed and `target` is untouched. It gets the permissions of a plain `os.makedirs`.

    Raises:
      FileExistsError: as `check_replaceable`, before anything is written.
      OSError: the parent directory cannot be created or written.
    """
    check_replaceable(target, overwrite=overwrite)
    target = os.path.abspath(os.fspath(target))
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.", suffix=".staging", dir=parent)
    try:
        os.chmod(staging, 0o777 & ~_umask())
        yield staging
        publish_directory(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
