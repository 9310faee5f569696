"""Where the package caches what it fetches or builds once (demo tokenizers, PyPI archives, XLA programs)."""

import os


def cache_dir() -> str:
    """`$APERTUS_JAX_CACHE`, default `~/.cache/apertus_jax` (not created here)."""
    return os.environ.get("APERTUS_JAX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "apertus_jax"))
