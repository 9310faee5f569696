"""apertus_jax.pypi: pinned archives are checked by sha256 before use."""

import pytest

from apertus_jax import pypi


def test_cached_archive_with_wrong_checksum_is_refused(tmp_path):
    archive = pypi.PypiArchive("demo==1", "demo-1.tar.gz", "0" * 64, sdist=True)
    (tmp_path / "demo-1.tar.gz").write_bytes(b"not the pinned file")
    with pytest.raises(ValueError, match="sha256 differs"):
        pypi.fetch_archive(archive, str(tmp_path))
