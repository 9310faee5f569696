"""The prep extra check: every package present here; a missing one is named with the install command."""

import sys

import pytest

from apertus_jax.prep.extra import PREP_MODULES, require_prep_extra


def test_installed_extra_passes():
    assert PREP_MODULES == ("datatrove", "protego", "pyarrow", "orjson")
    assert require_prep_extra("prepare_data") is None


@pytest.mark.parametrize("missing", ["datatrove", "orjson"])
def test_missing_package_is_named_with_the_install_command(missing, monkeypatch):
    monkeypatch.setitem(sys.modules, missing, None)  # a None entry makes the import fail
    with pytest.raises(OSError) as error:
        require_prep_extra("tokenize_data")
    assert str(error.value) == (
        f"tokenize_data needs the 'prep' extra ({missing} is not installed); "
        'install it with: pip install -e ".[prep]"'
    )
