"""Measured figures that cannot go stale: results files, and the figures of the docs bound to them.

A measurement writes `docs/results/NAME.json` (`write_result`, atomically)::

    {"command": the documented command(s) it ran, "date": "YYYY-MM-DD" (UTC), "commit": HEAD's sha,
     "uncommitted": [code files that differed from HEAD], "machine": {platform, processor, vendor, cpus,
     load_average}, "seconds": the measurement's wall time, "values": {value name: number or string},
     "processors": {processor kind: {"values": the deterministic values, "commit", "date"}}}

`processors`, in the files of the measurements the tests re-check, holds the deterministic values of every
processor kind measured on the same code (`tools.measure.processor_kinds`); `values` are those of the latest
measurement, which the docs quote.

A figure in README.md or docs/*.md is bound to a value by an HTML comment right after it, which rendered
Markdown does not show (docs/results.md)::

    the final loss is 5.68<!-- result demo.final_loss:.2f -->

`NAME.PATH[:SPEC]`: PATH is looked up in the file's `values` first, else in the record itself (`demo.date`,
`demo.machine.cpus`); SPEC is a Python format spec (`.2f`, `,.0f`, `.7` cuts a string to 7 characters;
none: `str`). The figure is the run of letters, digits and `. , : % + -` just before the comment (or a lone
`-`).
`rewrite` writes `format(value, SPEC)` there, `mismatches` lists the figures that differ from it. A marker
in a fenced block or an inline code span is an example, shown as written, and binds nothing.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import re
import subprocess
from collections.abc import Callable, Iterator

from apertus_jax import files

RESULTS_DIR = os.path.join("docs", "results")
# The documents whose figures are bound: README.md and every Markdown file under docs/.
DOCUMENTS = ("README.md", "docs")
MARKER = re.compile(
    r"(?P<figure>[-+]?[0-9A-Za-z][\w.,:%+-]*|-)"  # a lone "-": a table's "never" (`compare.markdown_table`)
    r"<!-- result (?P<name>\w+)\.(?P<path>\w+(?:\.\w+)*)(?::(?P<spec>[^ ]*))? -->"
)
# A figure not measured here, with its source: a paper, a specification, arithmetic
# (`2.037<!-- reference Apertus report, section 2.4 -->`, `8.32<!-- reference ln 4096 -->`).
REFERENCE = re.compile(r"(?P<figure>[-+]?[0-9A-Za-z][\w.,:%+-]*)<!-- reference (?P<source>[^<>]*\S) -->")
# Every marker's start, to find those MARKER and REFERENCE do not read (no figure before it, or malformed).
ANY_MARKER = re.compile(r"<!-- (?:result|reference)\b")
# A figure with a decimal point (what `unbound_figures` looks for): 5.68, 1,234.5; not v3.0.1, a path or a URL.
DECIMAL = re.compile(r"(?<![\w./])\d[\d,]*\.\d+(?![\w.]|-\w)")
# Words after which a decimal is a name, not a figure: arXiv 2509.14233, section 2.4, Python 3.11, Table 3.2.
NAMING = re.compile(
    r"(?:arXiv:?|[Ss]ections?|§|Python(?: >=)?|[Tt]ables?|[Ff]ig(?:ures?|s?\.)|[Ee]q\.|[Vv]ersions?)\s*$"
)
# Fenced blocks and inline code spans: a marker there is shown as written (an example), not a binding.
CODE = re.compile(r"^```.*?^```|`[^`\n]+`", re.MULTILINE | re.DOTALL)
# A block rendered whole from results files by the renderer NAME (`tools.measure.measurements.RENDERERS`):
# a table too wide to bind figure by figure. `regenerate` rewrites its body; its figures are not checked one
# by one (the test compares the whole block with its rendering).
GENERATED = re.compile(
    r"^<!-- begin generated: (?P<name>\w+) -->\n(?P<body>.*?)^<!-- end generated -->$",
    re.MULTILINE | re.DOTALL,
)
# The templates of the generated tables (`render_table`): TABLES_DIR/NAME.md, a Markdown table whose figures are
# bound as in any document (the template is one of the `documents`, checked and rewritten with them).
TABLES_DIR = os.path.join(RESULTS_DIR, "tables")


@dataclasses.dataclass(frozen=True)
class Binding:
    """One bound figure: `figure` as written at `line` (1-based) of a document, bound to `name.path:spec`."""

    figure: str
    name: str
    path: str
    spec: str
    line: int
    start: int  # offset of the figure in the document's text
    end: int  # offset just after the marker

    @property
    def key(self) -> str:
        return f"{self.name}.{self.path}"


def _outside_code(text: str, matches: Iterator[re.Match]) -> list[re.Match]:
    """The `matches` that start outside the fenced blocks and inline code spans of a Markdown text."""
    code = [m.span() for m in CODE.finditer(text)]
    return [m for m in matches if not any(start <= m.start() < end for start, end in code)]


def bindings(text: str) -> list[Binding]:
    """Every bound figure of a Markdown text, in order (markers in code blocks and spans are examples)."""
    return [
        Binding(
            figure=m.group("figure"),
            name=m.group("name"),
            path=m.group("path"),
            spec=m.group("spec") or "",
            line=text.count("\n", 0, m.start()) + 1,
            start=m.start(),
            end=m.end(),
        )
        for m in _outside_code(text, MARKER.finditer(text))
    ]


def references(text: str) -> list[tuple[str, str]]:
    """(figure, source) of every reference marker of a Markdown text, in order (outside code)."""
    return [(m.group("figure"), m.group("source")) for m in _outside_code(text, REFERENCE.finditer(text))]


def malformed(text: str) -> list[str]:
    """`LINE: ...` for each marker of a Markdown text that binds no figure (none just before it, or not of
    the form `<!-- result NAME.PATH[:SPEC] -->` or `<!-- reference SOURCE -->`)."""
    bound = {b.start + len(b.figure) for b in bindings(text)}
    bound |= {m.start() + len(m.group("figure")) for m in REFERENCE.finditer(text)}
    return [
        f"{text.count(chr(10), 0, m.start()) + 1}: a marker with no figure just before it, or not of the form "
        "<!-- result NAME.PATH[:SPEC] --> or <!-- reference SOURCE --> (docs/results.md)"
        for m in _outside_code(text, ANY_MARKER.finditer(text))
        if m.start() not in bound
    ]


def unbound_figures(text: str) -> list[str]:
    """The numbers with a decimal point of a Markdown text that are neither bound to a results file nor marked
    as a reference, outside code (a hand-typed measurement, unless it is arithmetic or a version)."""
    # A marked figure may be wider than its decimal: `1.99%`, `x5.68`.
    marked = [(b.start, b.start + len(b.figure)) for b in bindings(text)]
    marked += [(m.start(), m.start() + len(m.group("figure"))) for m in REFERENCE.finditer(text)]
    spans = [(m.start(), m.end()) for m in CODE.finditer(text)]
    spans += [(m.start(), m.end()) for m in re.finditer(r"<!--.*?-->", text, re.DOTALL)]  # markers' own text
    spans += [m.span() for m in GENERATED.finditer(text)]
    spans += list(marked)  # a bound figure may hold more than the decimal: a sign, a unit
    return [
        f"{text.count(chr(10), 0, m.start()) + 1}: {m.group()}"
        for m in DECIMAL.finditer(text)
        if not any(a <= m.start() < b for a, b in spans)
        and not NAMING.search(text[max(0, m.start() - 20) : m.start()])
    ]


def lookup(record: dict, path: str) -> object:
    """The value at dotted `path` of a results record: under `values` first, else of the record itself.

    Raises:
      KeyError: the record has no such value (the message names the path).
    """
    head, *rest = path.split(".")
    node = record["values"] if head in record["values"] else record
    for part in [head, *rest]:
        if not isinstance(node, dict) or part not in node:
            raise KeyError(f"no value {path}")
        node = node[part]
    return node


def results_path(root: str, name: str) -> str:
    """ROOT/docs/results/NAME.json."""
    return os.path.join(root, RESULTS_DIR, f"{name}.json")


def read_result(root: str, name: str) -> dict:
    """The record of ROOT/docs/results/NAME.json.

    Raises:
      FileNotFoundError: no such results file (the message names the command that writes it).
    """
    path = results_path(root, name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} does not exist: python -m tools.measure --only {name} writes it")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def documents(root: str) -> Iterator[str]:
    """The paths of the Markdown documents under ROOT whose figures may be bound (`DOCUMENTS`), sorted."""
    for entry in DOCUMENTS:
        path = os.path.join(root, entry)
        if os.path.isfile(path):
            yield path
            continue
        for directory, subdirs, names in sorted(os.walk(path)):
            subdirs.sort()
            yield from (os.path.join(directory, n) for n in sorted(names) if n.endswith(".md"))


def _expected(binding: Binding, record_of: Callable[[str], dict]) -> str:
    try:
        return format(lookup(record_of(binding.name), binding.path), binding.spec)
    except KeyError as error:
        raise KeyError(f"{binding.key}: {error.args[0]} in docs/results/{binding.name}.json") from None


def rewrite(text: str, record_of: Callable[[str], dict]) -> str:
    """`text` with every bound figure replaced by its value's formatted text.

    Args:
      record_of: NAME -> the record of docs/results/NAME.json (`read_result`).

    Raises:
      KeyError, FileNotFoundError, ValueError: a binding names a missing value or file, or a bad spec; a
        marker binds no figure (ValueError).
    """
    bad = malformed(text)
    if bad:
        raise ValueError(bad[0])
    pieces, last = [], 0
    for binding in bindings(text):
        marker = text[binding.start + len(binding.figure) : binding.end]
        pieces += [text[last : binding.start], _expected(binding, record_of), marker]
        last = binding.end
    return "".join(pieces + [text[last:]])


def render_table(root: str, name: str) -> str:
    """The body of the generated block NAME rendered from its template ROOT/docs/results/tables/NAME.md: the
    template's bound figures rewritten from their results files (`rewrite`), then its result and reference
    markers dropped, so that a table with many figures keeps rows a terminal can show.

    Raises:
      FileNotFoundError: no such template; as `rewrite` for its figures.
    """
    with open(os.path.join(root, TABLES_DIR, f"{name}.md"), encoding="utf-8") as f:
        template = f.read()
    records: dict[str, dict] = {}

    def record_of(result: str) -> dict:
        if result not in records:
            records[result] = read_result(root, result)
        return records[result]

    text = rewrite(template, record_of)
    return REFERENCE.sub(lambda m: m["figure"], MARKER.sub(lambda m: m["figure"], text))


def render_provenance(name: str, record: dict) -> str:
    """The body of the generated block `provenance_NAME`: one line that says when, at which commit and on
    which machine the figures of the section it opens were measured, and where they are (the record of
    docs/results/NAME.json), in place of a marker after each date, commit and machine figure."""
    machine = record["machine"]
    vendor = machine.get("vendor")
    kind = f"{machine['cpus']}-core {vendor} machine" if vendor else f"{machine['cpus']}-core machine"
    return (
        f"Measured {record['date']}, commit {record['commit'][:7]}, {kind} at load average "
        f"{machine['load_average']:.1f}: docs/results/{name}.json.\n"
    )


def regenerate(text: str, render: Callable[[str], str]) -> str:
    """`text` with the body of every generated block replaced by `render(NAME)` (a Markdown text ending in a
    newline).

    Raises:
      KeyError: a block names no renderer (raised by `render`).
    """
    return GENERATED.sub(
        lambda m: f"<!-- begin generated: {m['name']} -->\n{render(m['name'])}<!-- end generated -->", text
    )


def mismatches(text: str, record_of: Callable[[str], dict]) -> list[str]:
    """`LINE: NAME.PATH is FIGURE, its results file says TEXT` for each bound figure that differs, or whose
    value cannot be read (the reason instead), and for each marker that binds no figure (`malformed`)."""
    found = malformed(text)
    for binding in bindings(text):
        try:
            expected = _expected(binding, record_of)
        except (KeyError, OSError, ValueError) as error:
            reason = error.args[0] if isinstance(error, KeyError) else error
            found.append(f"{binding.line}: {reason}")
            continue
        if binding.figure != expected:
            found.append(
                f"{binding.line}: {binding.key} is {binding.figure}, its results file says {expected}"
            )
    return found


def rewrite_documents(root: str, render: Callable[[str], str]) -> list[str]:
    """Rewrites every bound figure and generated block (`render`: NAME -> its body, `regenerate`) of the
    documents under ROOT from docs/results/ (atomically, only the files that change); returns the paths
    rewritten.

    Raises:
      KeyError, FileNotFoundError, ValueError: as `rewrite` and `regenerate` (no document is written then).
    """
    cache: dict[str, dict] = {}

    def record_of(name: str) -> dict:
        if name not in cache:
            cache[name] = read_result(root, name)
        return cache[name]

    changed = {}
    for path in documents(root):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = regenerate(rewrite(text, record_of), render)
        if new != text:
            changed[path] = new
    for path, text in changed.items():
        files.write_text(path, text)
    return list(changed)


def _git(root: str, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def processor() -> str:
    """This machine's processor kind: `/proc/cpuinfo`'s first "model name", the widest vector instruction set
    its flags name, its family and model numbers, e.g. "AMD EPYC (AVX2, family 25 model 1)" (else
    `platform.processor()`). XLA:CPU's libraries choose their kernels by the instruction set, and estimate
    instructions round differently between vendors and generations (docs/results.md, "Across processor
    kinds"): the deterministic values are bitwise reproducible on one kind."""
    if not os.path.exists("/proc/cpuinfo"):
        return platform.processor()
    with open("/proc/cpuinfo") as f:
        first = f.read().split("\n\n")[0]
    fields = dict(line.split(":", 1) for line in first.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = set(fields.get("flags", "").split())
    isa = next((name for flag, name in ISA_FLAGS if flag in flags), "SSE")
    name = fields.get("model name") or platform.processor()
    return f"{name} ({isa}, family {fields.get('cpu family', '?')} model {fields.get('model', '?')})"


def vendor() -> str:
    """This machine's processor vendor as the docs name it ("Intel", "AMD"; else `/proc/cpuinfo`'s vendor_id,
    else `platform.machine()`)."""
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            ids = [line.split(":", 1)[1].strip() for line in f if line.startswith("vendor_id")]
        if ids:
            return VENDORS.get(ids[0], ids[0])
    return platform.machine()


VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}
# The vector instruction sets that name a processor kind, widest first (their /proc/cpuinfo flags).
ISA_FLAGS = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"))


def provenance(root: str) -> dict:
    """The `date`, `commit`, `uncommitted` and `machine` fields of a record measured now from ROOT (a git
    checkout). `uncommitted` lists the tracked files that differ from HEAD, Markdown and results files left
    out (a measurement rewrites those).

    Raises:
      OSError, subprocess.CalledProcessError: ROOT is not a git checkout or git is missing.
    """
    changed = _git(root, "diff", "--name-only", "HEAD").split()
    changed += _git(root, "ls-files", "--others", "--exclude-standard").split()
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "commit": _git(root, "rev-parse", "HEAD").strip(),
        "uncommitted": [p for p in changed if not p.endswith(".md") and not p.startswith(RESULTS_DIR)],
        "machine": {
            "platform": platform.platform(),
            "processor": processor(),
            "vendor": vendor(),
            "cpus": os.cpu_count(),
            # The figures of time are of a shared machine: its load when the measurement started.
            "load_average": round(os.getloadavg()[0], 2),
        },
    }


def write_result(
    root: str, name: str, command: str, values: dict, start: dict, seconds: float, processors: dict | None
) -> str:
    """Writes ROOT/docs/results/NAME.json atomically (module docstring); returns its path.

    Args:
      command: the documented command(s) the measurement ran, one line each.
      values: {value name: number or string}; no name may be a field of the record.
      start: `provenance(root)` taken when the measurement started.
      seconds: the measurement's wall time.
      processors: {processor kind: {"values", "commit", "date"}} (`processor_kinds.kept_processors`), or None
        for a measurement the tests do not re-check.

    Raises:
      ValueError: a value name is a field of the record.
    """
    record = {
        "command": command,
        **start,
        "seconds": round(seconds, 1),
        "values": values,
        **({} if processors is None else {"processors": processors}),
    }
    clash = sorted(set(values) & set(record))
    if clash:
        raise ValueError(f"value names {clash} are fields of the results record; rename them")
    return write_record(root, name, record)


def write_record(root: str, name: str, record: dict) -> str:
    """Writes the whole `record` as ROOT/docs/results/NAME.json atomically; returns its path."""
    path = results_path(root, name)
    files.write_text(path, json.dumps(record, indent=2) + "\n")
    return path
