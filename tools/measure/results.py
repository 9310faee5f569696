"""Measured figures that cannot go stale: results files, and the generated blocks of the docs that show them.

A measurement writes `docs/results/NAME.json` (`write_result`, atomically)::

    {"command": the documented command(s) it ran, "date": "YYYY-MM-DD" (UTC), "commit": HEAD's sha,
     "uncommitted": [code files that differed from HEAD], "machine": {platform, processor, vendor, cpus,
     load_average}, "seconds": the measurement's wall time, "values": {value name: number or string},
     "processors": {processor kind: {"values": the deterministic values, "times": the seconds of that kind's
     latest measurement (those that `Measurement.times` names, if any), "commit", "date"}}}

`processors`, in the files of the measurements the tests re-check, holds the deterministic values of every
processor kind measured on the same code (`tools.measure.processor_kinds`); `values` are those of the latest
measurement, which the docs quote.

The docs show a measured figure only inside a generated block (docs/results.md)::

    <!-- begin generated: NAME -->
    Measured by `python -m tools.measure --only demo` (docs/results/demo.json): 2026-12-05, commit 11dac83, ...

    | figure | value |
    ...
    <!-- end generated -->

`regenerate` rewrites each block's body from its results file(s): a table template `docs/results/tables/NAME.md`
whose placeholders `{RESULT.PATH[:SPEC]}` are filled (`render_table`), or a renderer of code
(`render_values`); either way the body's first line is the caption that names the results file (`caption`).
The page checks (`markers`, `hand_typed_figures`, `uncaptioned_blocks`, `long_lines`) keep figures out of the
prose.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import re
import subprocess
from collections.abc import Callable, Collection, Iterator, Mapping

from apertus_jax import files

RESULTS_DIR = os.path.join("docs", "results")
# The pages whose generated blocks are rewritten and whose figures are checked: README.md, BENCHMARKS.md, every
# Markdown page under docs/ (the table templates of TABLES_DIR are sources, not pages) and the dated benchmark
# reports under benchmarks/reports/.
DOCUMENTS = ("README.md", "BENCHMARKS.md", "docs", os.path.join("benchmarks", "reports"))
# The templates of the generated tables (`render_table`): TABLES_DIR/NAME.md, Markdown with placeholders.
TABLES_DIR = os.path.join(RESULTS_DIR, "tables")
# A template's placeholder: `{demo.final_loss:.2f}` is `format(value, ".2f")` of the value at `final_loss` of
# docs/results/demo.json (`lookup`: its `values` first, else the record: `{demo.commit:.7}`); a key of the path
# may hold a hyphen (`{maxtext_tpu.maxtext.collectives.all-gather.ops}`).
PLACEHOLDER = re.compile(r"\{(?P<name>\w+)\.(?P<path>[\w-]+(?:\.[\w-]+)*)(?::(?P<spec>[^{}\s]*))?\}")
# A block rendered from results files by the renderer or template NAME; `regenerate` rewrites its body.
GENERATED = re.compile(
    r"^<!-- begin generated: (?P<name>\w+) -->\n(?P<body>.*?)^<!-- end generated -->$",
    re.MULTILINE | re.DOTALL,
)
# The results file a generated block's first line must name.
NAMES_RESULTS = re.compile(r"docs/results/\w+\.json")
# Fenced blocks and inline code spans: what they hold is shown as written (commands, examples).
CODE = re.compile(r"^```.*?^```|`[^`\n]+`", re.MULTILINE | re.DOTALL)
# The former binding of a figure in prose, an HTML comment after it: none is left on a page.
MARKER = re.compile(r"<!-- (?:result|reference)\b")
# A figure with a decimal point (what `hand_typed_figures` looks for): 5.68, 1,234.5; not v3.0.1, a path or a URL.
DECIMAL = re.compile(r"(?<![\w./])\d[\d,]*\.\d+(?![\w.]|-\w)")
# Words after which a decimal is a name, not a figure: arXiv 2509.14233, section 2.4, Python 3.11, Table 3.2,
# Llama 3.1, jax 0.11.
NAMING = re.compile(
    r"(?:arXiv:?|[Ss]ections?|§|Python(?: >=)?|[Tt]ables?|[Ff]ig(?:ures?|s?\.)|[Ee]q\.|[Vv]ersions?|Llama"
    r"|[Jj][Aa][Xx](?:lib)?|flax)\s*$"
)
# The longest line of prose a page may have (tables and code are exempt).
LONGEST_LINE = 300


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _inside(offset: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= offset < end for start, end in spans)


def blocks(text: str) -> list[re.Match]:
    """The generated blocks of a Markdown page (`GENERATED` matches), those in code (an example) left out."""
    code = [m.span() for m in CODE.finditer(text)]
    return [m for m in GENERATED.finditer(text) if not _inside(m.start(), code)]


def markers(text: str) -> list[str]:
    """`LINE: MARKER` for each `<!-- result ...` or `<!-- reference ...` comment of a Markdown page outside
    code: the old binding of a figure in a sentence or a table cell (a measured figure belongs in a generated
    block, a constant needs no marker)."""
    code = [m.span() for m in CODE.finditer(text)]
    return [
        f"{_line(text, m.start())}: {text[m.start() : text.find('-->', m.start()) + 3]}"
        for m in MARKER.finditer(text)
        if not _inside(m.start(), code)
    ]


def _source_line(text: str, offset: int) -> str:
    """The line of `text` at `offset`; for a table row, with the table's header row (a table names its source once,
    in its header)."""
    start = text.rfind("\n", 0, offset) + 1
    line = text[start : (text + "\n").find("\n", offset)]
    if not line.startswith("|"):
        return line
    while start > 0:
        previous = text.rfind("\n", 0, start - 1) + 1
        if not text.startswith("|", previous):
            break
        start = previous
    return text[start : text.find("\n", start)] + "\n" + line


def hand_typed_figures(text: str, constants: Collection[tuple[str, str]]) -> list[str]:
    """`LINE: FIGURE` for each number with a decimal point of a Markdown page outside code and generated blocks
    that is neither a name (after `NAMING`: a version, a section, an arXiv id) nor a constant: a (figure,
    source) pair of `constants` whose source its line names ("ln 4096 = 8.32": ("8.32", "ln 4096")), or for a
    table row, the row or the table's header. What is left is a figure typed by hand, a measured one unless
    proven otherwise (integers are not checked)."""
    spans = [m.span() for m in CODE.finditer(text)] + [m.span() for m in blocks(text)]
    found = []
    for m in DECIMAL.finditer(text):
        if _inside(m.start(), spans) or NAMING.search(text[max(0, m.start() - 20) : m.start()]):
            continue
        line = _source_line(text, m.start())
        if not any(figure == m.group() and source in line for figure, source in constants):
            found.append(f"{_line(text, m.start())}: {m.group()}")
    return found


def uncaptioned_blocks(text: str) -> list[str]:
    """`LINE: NAME` for each generated block of a Markdown page whose first line names no results file
    (`docs/results/NAME.json`): a reader of the page must see where its figures come from."""
    return [
        f"{_line(text, m.start())}: {m['name']}"
        for m in blocks(text)
        if not NAMES_RESULTS.search(m["body"].partition("\n")[0])
    ]


def long_lines(text: str, limit: int = LONGEST_LINE) -> list[str]:
    """`LINE: LENGTH` for each line of a Markdown page over `limit` characters that is neither a table row nor
    code (fenced, or indented by four spaces): prose reads raw only when it wraps."""
    found, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and not line.startswith(("|", "    ")) and len(line) > limit:
            found.append(f"{number}: {len(line)}")
    return found


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
    """The paths of the Markdown pages under ROOT (`DOCUMENTS`, the templates of TABLES_DIR left out), sorted."""
    templates = os.path.join(root, TABLES_DIR)
    for entry in DOCUMENTS:
        path = os.path.join(root, entry)
        if os.path.isfile(path):
            yield path
            continue
        found = []
        for directory, subdirs, names in os.walk(path):
            subdirs[:] = [d for d in subdirs if os.path.join(directory, d) != templates]
            found += [os.path.join(directory, n) for n in names if n.endswith(".md")]
        yield from sorted(found)


def fill(template: str, record_of: Callable[[str], dict]) -> str:
    """`template` with each placeholder `{RESULT.PATH[:SPEC]}` replaced by `format(value, SPEC)`.

    Args:
      record_of: RESULT -> the record of docs/results/RESULT.json (`read_result`).

    Raises:
      KeyError: a placeholder names a missing value (the message names it and its results file);
      FileNotFoundError: a missing results file; ValueError: a bad SPEC.
    """

    def value(m: re.Match) -> str:
        try:
            return format(lookup(record_of(m["name"]), m["path"]), m["spec"] or "")
        except KeyError as error:
            raise KeyError(f"{m.group()}: {error.args[0]} in docs/results/{m['name']}.json") from None

    return PLACEHOLDER.sub(value, template)


def machine(record: dict) -> str:
    """The machine of a results record as a caption names it: "2-core Intel machine at load average 2.9", or
    its `platform` where it has no load (a record gathered from another machine, as one with a GPU)."""
    found = record["machine"]
    if "load_average" not in found:
        return found["platform"]
    kind = " ".join(p for p in (f"{found['cpus']}-core", found.get("vendor"), "machine") if p)
    return f"{kind} at load average {found['load_average']:.1f}"


def caption(names: list[str], record_of: Callable[[str], dict]) -> str:
    """The caption of a generated block: its first line names the command that measured its figures and the
    results file(s) they are read from, with the date, commit and machine of each (the figures are of that
    machine and that code), on a line of its own for each of several files."""
    command = f"`python -m tools.measure --only {','.join(names)}`"
    when = {
        n: f"{record_of(n)['date']}, commit {record_of(n)['commit'][:7]}, {machine(record_of(n))}"
        for n in names
    }
    if len(names) == 1:
        return f"Measured by {command} (docs/results/{names[0]}.json): {when[names[0]]}.\n"
    files = ", ".join(f"docs/results/{n}.json" for n in names)
    return f"Measured by {command} ({files}):\n" + "".join(
        f"- docs/results/{n}.json: {when[n]}\n" for n in names
    )


def _cached(root: str, derived: Mapping[str, Callable[[dict], dict]] | None = None) -> Callable[[str], dict]:
    records: dict[str, dict] = {}

    def record_of(name: str) -> dict:
        if name not in records:
            record = read_result(root, name)
            if derived and name in derived:
                record = {**record, "values": {**record["values"], **derived[name](record)}}
            records[name] = record
        return records[name]

    return record_of


def render_table(root: str, name: str, derived: Mapping[str, Callable[[dict], dict]] | None = None) -> str:
    """The body of the generated block NAME from its template ROOT/docs/results/tables/NAME.md: the caption of
    the results files its placeholders name (in order of first use), a blank line, the template filled.

    Args:
      derived: {results name: record -> {value name: value}}: values a placeholder may name beside the record's
        own, derived from the whole record (e.g. from its `processors`).

    Raises:
      FileNotFoundError: no such template; as `fill` for its placeholders.
    """
    with open(os.path.join(root, TABLES_DIR, f"{name}.md"), encoding="utf-8") as f:
        template = f.read()
    record_of = _cached(root, derived)
    names = list(dict.fromkeys(m["name"] for m in PLACEHOLDER.finditer(template)))
    return f"{caption(names, record_of)}\n{fill(template, record_of)}"


def render_values(root: str, name: str, render: Callable[[dict], str]) -> str:
    """The body of the generated block NAME rendered by code: the caption of docs/results/NAME.json, a blank
    line, `render` of its values (Markdown ending in a newline); one line saying how to measure it while that
    results file does not exist (a measurement run on another machine, recorded later)."""
    record_of = _cached(root)
    if not os.path.exists(results_path(root, name)):
        return f"Not measured yet: `python -m tools.measure --only {name}` writes docs/results/{name}.json.\n"
    return f"{caption([name], record_of)}\n{render(record_of(name)['values'])}"


def regenerate(text: str, render: Callable[[str], str]) -> str:
    """`text` with the body of every generated block replaced by `render(NAME)` (a Markdown text ending in a
    newline); a block in code is an example, left as written.

    Raises:
      KeyError, FileNotFoundError: a block names no renderer or template (raised by `render`).
    """
    pieces, last = [], 0
    for m in blocks(text):
        pieces += [text[last : m.start("body")], render(m["name"])]
        last = m.end("body")
    return "".join(pieces + [text[last:]])


def rewrite_documents(root: str, render: Callable[[str], str]) -> list[str]:
    """Rewrites every generated block (`render`: NAME -> its body, `regenerate`) of the pages under ROOT
    (atomically, only the files that change); returns the paths rewritten.

    Raises:
      KeyError, FileNotFoundError, ValueError: as `regenerate` and `fill` (no page is written then).
    """
    changed = {}
    for path in documents(root):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = regenerate(text, render)
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


def stack() -> str:
    """This Python's JAX as the records name it ("jax 0.10.2"): two stacks compile the same program to other
    kernels (docs/stacks.md), so the deterministic values are bitwise reproducible on one kind and one stack."""
    return f"jax {importlib.metadata.version('jax')}"


def kind() -> str:
    """What the per-kind records are keyed by: this processor kind on this stack, e.g. "AMD EPYC (AVX2, family 25
    model 1) with jax 0.10.2" (`processor`, `stack`)."""
    return f"{processor()}{KIND_STACK}{stack()}"


def kind_of(record: dict) -> str:
    """The kind a results `record` was measured on (its `machine`'s processor and stack)."""
    return f"{record['machine']['processor']}{KIND_STACK}{record['machine']['stack']}"


def stack_of(kind_name: str) -> str:
    """The stack of a record's kind ("jax 0.10.2" of "... with jax 0.10.2")."""
    return kind_name.rpartition(KIND_STACK)[2]


# Between the processor and the stack in a kind's name.
KIND_STACK = " with "


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
            "stack": stack(),
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
