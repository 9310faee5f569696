"""apertus_jax.files: atomic writes leave the old file or the whole new one, with umask permissions;
file checksums; a staged directory replaces its target whole or not at all."""

import hashlib
import json
import os
import pathlib
import stat

import pytest

from apertus_jax import files
from apertus_jax.data.demo_corpus import load_demo_documents


def test_write_json_text_and_bytes_replace_the_target(tmp_path):
    path = tmp_path / "sub" / "record.json"
    files.write_json(path, {"a": 1}, indent=1)
    assert json.loads(path.read_text()) == {"a": 1}
    files.write_text(path, "new")
    assert path.read_text() == "new"
    files.write_bytes(tmp_path / "b.bin", b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert sorted(os.listdir(tmp_path / "sub")) == ["record.json"]  # no temporary file left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "record.json"
    path.write_text("old")
    with pytest.raises(TypeError):
        files.write_json(path, {"not serializable": object()})
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["record.json"]


def test_atomic_path_keeps_the_extension_and_gives_umask_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        with files.atomic_path(tmp_path / "plot.png") as tmp:
            assert tmp.endswith(".png") and os.path.dirname(tmp) == str(tmp_path)
            with open(tmp, "wb") as f:
                f.write(b"png")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "plot.png").st_mode) == 0o644


@pytest.mark.slow
def test_file_sha256_matches_hashlib_across_read_blocks(tmp_path):
    udhr = "\n".join(d["text"] for d in load_demo_documents(sources=["udhr"])[:40])
    data = (udhr * 400).encode("utf-8")  # > 1 MiB: several read blocks
    assert len(data) > 1 << 20
    path = tmp_path / "udhr.txt"
    path.write_bytes(data)
    assert files.file_sha256(path) == hashlib.sha256(data).hexdigest()


def test_file_sha256_of_known_bytes(tmp_path):
    (tmp_path / "abc").write_bytes(b"abc")
    assert (
        files.file_sha256(tmp_path / "abc")
        == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_staged_directory_replaces_the_target_whole_or_leaves_it(tmp_path):
    target = tmp_path / "out"
    with files.staged_directory(target) as staging:
        (pathlib.Path(staging) / "a").write_text("1")
        assert not target.exists()
    assert os.listdir(target) == ["a"]
    with pytest.raises(
        FileExistsError, match="is not empty; choose a new output directory or pass --overwrite"
    ):
        with files.staged_directory(target):
            raise AssertionError("not reached")
    with pytest.raises(RuntimeError):
        with files.staged_directory(target, overwrite=True) as staging:
            (pathlib.Path(staging) / "b").write_text("2")
            raise RuntimeError
    assert os.listdir(target) == ["a"] and sorted(os.listdir(tmp_path)) == ["out"]
    with files.staged_directory(target, overwrite=True) as staging:
        (pathlib.Path(staging) / "b").write_text("2")
    assert os.listdir(target) == ["b"] and sorted(os.listdir(tmp_path)) == ["out"]
    (tmp_path / "file").write_text("")
    with pytest.raises(FileExistsError, match="is a file, not a directory"):
        files.check_replaceable(tmp_path / "file", overwrite=True)
