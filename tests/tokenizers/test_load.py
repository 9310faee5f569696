"""load_tokenizer: spec parsing and one-line errors; the accepted forms are one list (`SPEC_FORMS`)."""

import pytest

from apertus_jax.data.run_tokenizer import run_tokenizer
from apertus_jax.tokenizers import load_tokenizer
from apertus_jax.tokenizers.load import KINDS, SPEC_FORMS, check_spec


def test_the_forms_are_demo_and_every_kind_load_tokenizer_knows():
    assert SPEC_FORMS == ("demo", "tekken", "sentencepiece:PATH", "hf:PATH")
    assert {form.partition(":")[0] for form in SPEC_FORMS} == {"demo", *KINDS}


@pytest.mark.parametrize(
    "spec", ["", "dmo", "tiktoken", "tekken:extra", "sentencepiece", "hf:", "spm:/x.model"]
)
def test_an_unknown_spec_names_every_accepted_form(spec):
    """Before: the message listed "tekken", "sentencepiece:/path/model.model" or "hf:/path/tokenizer.json" from a
    string typed apart from the kinds, without "demo", which a run's data.tokenizer and --tokenizer accept."""
    message = f"unknown tokenizer spec {spec!r}; use demo, tekken, sentencepiece:PATH or hf:PATH"
    for check in (check_spec, load_tokenizer, lambda spec: run_tokenizer(spec, 4096)):
        with pytest.raises(ValueError) as raised:
            check(spec)
        assert str(raised.value) == message
        assert all(form in str(raised.value) for form in SPEC_FORMS)


def test_demo_is_a_form_that_load_tokenizer_leaves_to_run_tokenizer():
    check_spec("demo")
    with pytest.raises(ValueError, match="'demo' is the demo BPE, .* load it with .*run_tokenizer"):
        load_tokenizer("demo")


@pytest.mark.parametrize("spec", ["sentencepiece:/no/such.model", "hf:/no/such/tokenizer.json"])
def test_missing_file(spec):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_tokenizer(spec)
