"""The cache directory: $APERTUS_JAX_CACHE, else ~/.cache/apertus_jax."""

import os

from apertus_jax.cache import cache_dir


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("APERTUS_JAX_CACHE", str(tmp_path))
    assert cache_dir() == str(tmp_path)
    monkeypatch.delenv("APERTUS_JAX_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == os.path.join(str(tmp_path / "home"), ".cache", "apertus_jax")
