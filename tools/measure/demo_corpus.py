"""The counts of the vendored demo corpus and its splits (docs/usage.md, docs/data.md), printed as one JSON object.

    python -m tools.measure.demo_corpus

Prints {udhr_translations, udhr_languages (ISO 639-3 codes, `und` left out), prose_mb (UTF-8 MB = 1e6 bytes of
the German prose, 2 decimals), heldout_udhr_paragraphs, heldout_udhr_translations (the translations they come
from), heldout_prose_documents, unseen_translations (held out whole)}; the `demo_corpus` measurement reads it.
"""

import json

from apertus_jax.data.demo_corpus import load_demo_documents, load_german_prose, load_udhr, udhr_languages


def counts() -> dict:
    """The counts this module prints (module docstring)."""
    heldout = load_demo_documents("heldout", ["udhr"])
    return {
        "udhr_translations": len(load_udhr()),
        "udhr_languages": len({language["iso6393"] for language in udhr_languages()} - {"und"}),
        "prose_mb": round(sum(len(d["text"].encode()) for d in load_german_prose()) / 1e6, 2),
        "heldout_udhr_paragraphs": len(heldout),
        "heldout_udhr_translations": len({d["code"] for d in heldout}),
        "heldout_prose_documents": len(load_demo_documents("heldout", ["german_prose"])),
        "unseen_translations": len(load_demo_documents("unseen_languages")),
    }


if __name__ == "__main__":
    print(json.dumps(counts()))
