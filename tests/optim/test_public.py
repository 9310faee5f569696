"""The public names of `apertus_jax.optim`, imported as the docs import them: each is the object of its module,
none shadowed by a module of its name (importing the trainer loads none of them: tests/test_layers.py)."""

import pytest

import apertus_jax.optim
from apertus_jax.optim import PUBLIC, BatchSizePlan, adamw, ademamix, lion, muon, wsd_schedule


def test_the_documented_imports_are_the_functions():
    from apertus_jax.optim.baselines import adamw as adamw_of_module
    from apertus_jax.optim.ema_mixture import ademamix as ademamix_of_module
    from apertus_jax.optim.orthogonal import muon as muon_of_module

    assert ademamix is ademamix_of_module and muon is muon_of_module and adamw is adamw_of_module
    assert callable(lion) and callable(wsd_schedule) and isinstance(BatchSizePlan, type)
    transform = ademamix(1e-3)  # an optax transform, as the docs use it
    assert hasattr(transform, "init") and hasattr(transform, "update")


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_every_public_name_is_its_modules_object_and_no_module_has_its_name(name):
    module = __import__(f"apertus_jax.optim.{PUBLIC[name]}", fromlist=[name])
    assert getattr(apertus_jax.optim, name) is getattr(module, name)
    assert name not in {
        p.stem for p in __import__("pathlib").Path(apertus_jax.optim.__file__).parent.glob("*.py")
    }


def test_an_unknown_name_is_no_attribute():
    with pytest.raises(AttributeError, match="has no attribute 'adam'"):
        apertus_jax.optim.adam  # noqa: B018
