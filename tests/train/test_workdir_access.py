"""check_workdir_usable: real probes (root ignores permission bits), one-line errors, nothing left behind."""

import os

import pytest

from apertus_jax.train.checkpoint import check_workdir_usable


def test_usable_workdirs_pass_and_leave_nothing(tmp_path):
    (tmp_path / "existing").mkdir()
    check_workdir_usable(str(tmp_path / "existing"))
    check_workdir_usable(str(tmp_path / "new" / "deeper"))
    assert sorted(os.listdir(tmp_path)) == ["existing"] and not os.listdir(tmp_path / "existing")


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda tmp: (tmp / "file").write_text("x") and tmp / "file" / "run", "is a file, not a directory"),
        (lambda tmp: (tmp / "file").write_text("x") and tmp / "file", "exists and is not a directory"),
        # Under /proc mkdir fails with ENOENT even for root, although os.access says "writable".
        (lambda tmp: "/proc/apertus-workdir-test/run", "cannot be created in /proc"),
    ],
)
def test_unusable_workdirs_raise_one_line_naming_the_workdir(tmp_path, make, message):
    workdir = str(make(tmp_path))
    with pytest.raises(ValueError, match=message) as info:
        check_workdir_usable(workdir)
    assert f"workdir {workdir} " in str(info.value) and "--workdir=" in str(info.value)
    assert "\n" not in str(info.value)
    assert os.listdir(tmp_path) in ([], ["file"])


def test_an_empty_workdir_is_named_as_such():
    """Before: accepted (it resolves to the working directory), then `[Errno 2] No such file or directory: ''`."""
    with pytest.raises(ValueError, match="^--out is empty; pass --out= a directory you can write"):
        check_workdir_usable("", "--out")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into 0o500 directories")
def test_read_only_directory(tmp_path):
    (tmp_path / "ro").mkdir(mode=0o500)
    with pytest.raises(ValueError, match="is not writable"):
        check_workdir_usable(str(tmp_path / "ro"))
