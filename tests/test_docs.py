"""The repository stands alone: recipe citations resolve to docs/recipe.md headings, nothing points outside."""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(ROOT, "docs", "recipe.md")
SCANNED = (
    "apertus_jax",
    "experiments",
    "configs",
    "benchmarks",
    "tools",
    "tests",
    "docs",
    "README.md",
    "BENCHMARKS.md",
)
TEXT_SUFFIXES = (".py", ".md", ".sh", ".sbatch", ".toml", ".ini", ".txt", ".json", ".yaml", ".yml", ".ipynb")
THIS_FILE = os.path.abspath(__file__)

# "docs/recipe.md section 4", "sections 4 and 5", "sections 1, 4-6", "docs/recipe.md 7", "docs/recipe.md 2-3".
_NUMBERS = r"\d+(?:\s*-\s*\d+)?(?:\s*(?:,|and)\s*\d+(?:\s*-\s*\d+)?)*"
CITATION = re.compile(rf"docs/recipe\.md`?[,)]?\s+(?:sections?\s+)?(?P<numbers>{_NUMBERS})?")
HEADING = re.compile(r"^## (\d+)\. \S", re.MULTILINE)
# Written in pieces so that a grep of the repository for these references does not find this file.
OUTSIDE_REFERENCES = re.compile(r"SPEC" r"\.md|\.\./shared|/wo" r"rk/|iss" r"ue [0-9]", re.IGNORECASE)
# Documents of the development machine that a clone does not have (docs/data.md is the repo's own page).
OUTSIDE_DOCUMENTS = re.compile(r"\bDATA\.md|JAX_NOTES\.md|HELPER_RULES\.md")


def section_numbers(numbers: str) -> list[int]:
    """'1, 4-6 and 9' -> [1, 4, 5, 6, 9]."""
    result = []
    for part in re.split(r"\s*(?:,|and)\s*", numbers.strip()):
        low, _, high = part.partition("-")
        result.extend(range(int(low), int(high or low) + 1))
    return result


def text_files():
    for entry in SCANNED:
        path = os.path.join(ROOT, entry)
        if os.path.isfile(path):
            yield path
            continue
        for directory, subdirs, files in os.walk(path):
            subdirs[:] = [d for d in subdirs if d != "__pycache__"]
            for name in files:
                if name.endswith(TEXT_SUFFIXES):
                    yield os.path.join(directory, name)


def read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def recipe_sections() -> set[int]:
    return {int(n) for n in HEADING.findall(read(RECIPE))}


def test_section_numbers_parse_lists_and_ranges():
    assert section_numbers("4") == [4]
    assert section_numbers("4 and 5") == [4, 5]
    assert section_numbers("1, 4-6") == [1, 4, 5, 6]
    assert section_numbers("3, 8, 9") == [3, 8, 9]
    assert [
        m.group("numbers") for m in CITATION.finditer("(docs/recipe.md 2-3). docs/recipe.md sections 1, 4-6:")
    ] == [
        "2-3",
        "1, 4-6",
    ]


def test_recipe_sections_are_numbered_one_to_thirteen():
    numbers = [int(n) for n in HEADING.findall(read(RECIPE))]
    assert numbers == list(range(1, 14))


def test_every_recipe_citation_names_an_existing_section():
    sections = recipe_sections()
    cited, broken = 0, []
    for path in text_files():
        if path in (RECIPE, THIS_FILE):
            continue
        text = read(path)
        for match in CITATION.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            where = f"{os.path.relpath(path, ROOT)}:{line}"
            if not match.group("numbers"):
                broken.append(f"{where}: no section number")
                continue
            cited += 1
            missing = [n for n in section_numbers(match.group("numbers")) if n not in sections]
            if missing:
                broken.append(f"{where}: section(s) {missing} not in docs/recipe.md")
    assert cited > 50  # the scan really sees the docstrings
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize(
    "pattern",
    [
        "SPEC" + ".md",
        "../sha" + "red",
        "/wo" + "rk/",
        "iss" + "ue 5",
        "Iss" + "ue 12",
        "DATA.md",
        "JAX_NOTES.md",
    ],
)
def test_outside_reference_patterns_match(pattern):
    line = f"see {pattern} for details"
    assert OUTSIDE_REFERENCES.search(line) or OUTSIDE_DOCUMENTS.search(line)


@pytest.mark.parametrize("line", ["see docs/data.md", "assets/DATA_CARD.md", "docs/recipe.md section 4"])
def test_own_documents_are_not_outside_references(line):
    assert not OUTSIDE_REFERENCES.search(line) and not OUTSIDE_DOCUMENTS.search(line)


def test_nothing_refers_outside_the_repository():
    hits = []
    for path in text_files():
        if path == THIS_FILE:
            continue
        for line_number, line in enumerate(read(path).splitlines(), 1):
            if OUTSIDE_REFERENCES.search(line) or OUTSIDE_DOCUMENTS.search(line):
                hits.append(f"{os.path.relpath(path, ROOT)}:{line_number}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)


# Relative Markdown links of the pages (README.md, BENCHMARKS.md, docs/, the dated benchmark reports): `[text](path)`,
# `[text](path#anchor)`, `[text](#anchor)`; a URL with a scheme is not followed.
LINK = re.compile(r"\]\((?P<path>[^)\s#]*)(?:#(?P<anchor>[^)\s]+))?\)")
FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def link_pages() -> list[str]:
    pages = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "BENCHMARKS.md")]
    for folder in ("docs", os.path.join("benchmarks", "reports")):
        for directory, _, names in os.walk(os.path.join(ROOT, folder)):
            pages += [os.path.join(directory, n) for n in names if n.endswith(".md")]
    return sorted(pages)


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def dangling_links(path: str, text: str) -> list[str]:
    """`LINK` for each relative link of the page at `path` (outside fenced code) to a file that does not exist, or
    to a heading its Markdown target does not have."""
    found = []
    for match in LINK.finditer(FENCED.sub("", text)):
        target, heading = match["path"], match["anchor"]
        if re.match(r"[a-z]+:", target):
            continue
        file = os.path.normpath(os.path.join(os.path.dirname(path), target))
        if target and not os.path.exists(file):
            found.append(match.group())
        elif heading and (not target or file.endswith(".md")):
            headings = re.findall(r"^#+ (.*)$", read(file) if target else text, re.MULTILINE)
            if heading not in {anchor(h) for h in headings}:
                found.append(match.group())
    return found


def test_anchors_and_dangling_links_are_found():
    assert (
        anchor("Try it (Python >= 3.11, pip; no accelerator needed)")
        == "try-it-python--311-pip-no-accelerator-needed"
    )
    page = os.path.join(ROOT, "docs", "page.md")
    text = (
        "# A page\n\n[ok](usage.md) [ok](../BENCHMARKS.md#reports) [ok](#a-page) [web](https://example.org/x)\n"
        "[gone](../BENCHMARKS.md#page-faults) [gone](reports/none.md) [gone](#no-heading)\n"
        "```\n[in code](nowhere.md)\n```\n"
    )
    assert dangling_links(page, text) == [
        "](../BENCHMARKS.md#page-faults)",
        "](reports/none.md)",
        "](#no-heading)",
    ]


@pytest.mark.parametrize("path", [os.path.relpath(p, ROOT) for p in link_pages()])
def test_every_relative_link_resolves(path):
    """A link to a moved section (the dated sections of BENCHMARKS.md are reports now) or file fails here."""
    found = dangling_links(os.path.join(ROOT, path), read(os.path.join(ROOT, path)))
    assert not found, f"{path}: {found}"
