"""The extra check: an installed extra passes; a missing package is named with its extra and the install
command; every extra named is one of setup.py's."""

import pathlib
import re
import sys

import pytest

from apertus_jax import extras

SETUP = pathlib.Path(__file__).parents[1] / "setup.py"


def test_every_extra_is_one_of_setup_py():
    declared = set(re.findall(r'^\s+"(\w+)": \[', SETUP.read_text(), re.MULTILINE))
    assert {"dev", "hf", "eval", "wandb", "prep", "seqio"} <= declared
    assert set(extras.MODULES) <= declared


def test_installed_extras_pass():
    assert extras.missing("prep") is None and extras.missing("eval") is None
    assert extras.require("prep", "tokenize_data") is None


@pytest.mark.parametrize("absent", ["datatrove", "orjson"])
def test_missing_package_is_named_with_its_extra_and_the_install_command(absent, monkeypatch):
    monkeypatch.setitem(sys.modules, absent, None)  # a None entry: the package cannot be found
    assert extras.missing("prep") == absent
    with pytest.raises(ValueError) as error:
        extras.require("prep", "tokenize_data")
    assert str(error.value) == (
        f"tokenize_data needs the 'prep' extra ({absent} is not installed); "
        'install it with: pip install -e ".[prep]"'
    )


def test_the_packages_one_use_needs_and_a_dotted_name_whose_parent_is_missing():
    """`modules` checks part of an extra (a target's compiler); a dotted package under a missing parent is
    missing, not an error."""
    assert extras.missing("accelerators", ("json", "importlib.util")) is None
    assert extras.missing("accelerators", ("json", "no_such_parent.child")) == "no_such_parent.child"
    with pytest.raises(ValueError) as error:
        extras.require("accelerators", "--target=v5e-4", ("no_such_parent.child",))
    assert str(error.value) == (
        "--target=v5e-4 needs the 'accelerators' extra (no_such_parent.child is not installed); "
        'install it with: pip install -e ".[accelerators]"'
    )
