"""`load_tokenizer(spec)`: one string names any tokenizer the pipeline can use.

Specs (`SPEC_FORMS`, the one list that flags, docs and errors name): "demo" (the demo BPE, which
`apertus_jax.data.run_tokenizer` trains on the demo corpus on first use), "tekken" (the Apertus tokenizer, from
mistral-common), "sentencepiece:PATH" (a `.model` file), "hf:PATH" (a `tokenizer.json`).
"""

from apertus_jax.named import load_named
from apertus_jax.tokenizers.base import Tokenizer

DEMO = "demo"
# "module:Class" by spec kind, and whether the kind takes a path; a class's module is imported when a spec
# first names it
KINDS = {
    "tekken": ("apertus_jax.tokenizers.tekken:TekkenTokenizer", False),
    "sentencepiece": ("apertus_jax.tokenizers.sentencepiece_model:SentencePieceTokenizer", True),
    "hf": ("apertus_jax.tokenizers.hf:HFTokenizer", True),
}
SPEC_FORMS = (DEMO, *(f"{kind}:PATH" if takes_path else kind for kind, (_, takes_path) in KINDS.items()))


def spec_forms() -> str:
    """`SPEC_FORMS` as prose: "demo, tekken, sentencepiece:PATH or hf:PATH"."""
    return f"{', '.join(SPEC_FORMS[:-1])} or {SPEC_FORMS[-1]}"


def check_spec(spec: str) -> None:
    """Checks that `spec` has one of the `SPEC_FORMS` (its file is not read).

    Raises:
      ValueError: one line naming the spec and every accepted form.
    """
    kind, _, path = spec.partition(":")
    if spec != DEMO and (kind not in KINDS or KINDS[kind][1] != bool(path)):
        raise ValueError(f"unknown tokenizer spec {spec!r}; use {spec_forms()}")


def load_tokenizer(spec: str) -> Tokenizer:
    """Loads the tokenizer named by `spec` (`SPEC_FORMS` but "demo", which `data.run_tokenizer` builds).

    Raises:
      ValueError: a spec of none of the forms (`check_spec`), "demo", or a file the tokenizer class rejects.
      FileNotFoundError: the named file does not exist.
    """
    check_spec(spec)
    if spec == DEMO:
        raise ValueError(
            f"tokenizer spec {DEMO!r} is the demo BPE, trained on the demo corpus on first use: load it with "
            "apertus_jax.data.run_tokenizer.run_tokenizer, or pass its file as sentencepiece:PATH"
        )
    kind, _, path = spec.partition(":")
    cls = load_named(KINDS[kind][0])
    return cls(path) if path else cls()
