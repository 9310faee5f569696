"""What a compiled program holds at its memory peak: the values live there, grouped by what made them.

    groups = peak_groups(dump_dir)   # compiled with XLA_FLAGS=--xla_dump_to=DIR (or compiler_options)

With `--xla_dump_to`, XLA writes per compiled module `...after_optimizations-live-range.txt` (the values live at
the peak of its heap simulation, with their bytes) beside `...after_optimizations.txt` (the optimized HLO). A
group is the values of one shape made by one kind of instruction for one source operation: the `op_name` jax
records, e.g. `jvp()/convert_element_type` (a weight cast in the forward pass) or `transpose(jvp())/...`
(the backward pass). The heap's peak is below the compiler's temporaries when its allocation fragments.
"""

from __future__ import annotations

import collections
import glob
import re

_PEAK = re.compile(r"Live ranges at \d+ \(peak\):\n(?P<values>(?:\s+\S+: \d+ bytes.*\n)+)")
_VALUE = re.compile(r"^\s+(?P<name>[^\s{]+)(?P<index>\{[^}]*\}): (?P<bytes>\d+) bytes", re.M)
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?(?P<name>[\w.\-]+) = (?P<type>.+?) (?P<op>[\w\-]+)\(")
_OP_NAME = re.compile(r'op_name="(?P<op_name>[^"]*)"')
_LAYOUT = re.compile(r"\{[^{}]*\}")


def live_at_peak(live_range_text: str) -> list[tuple[str, str, int]]:
    """(instruction, tuple index such as "{}" or "{1}", bytes) of every value live at the peak.

    Raises:
      ValueError: the text has no "Live ranges at N (peak)" section.
    """
    peak = _PEAK.search(live_range_text)
    if peak is None:
        raise ValueError("no 'Live ranges at N (peak)' section: is this an XLA live-range dump?")
    return [(m["name"], m["index"], int(m["bytes"])) for m in _VALUE.finditer(peak["values"])]


def _element_types(hlo_type: str) -> list[str]:
    """The types of a result, layouts dropped: one for an array, each element of a tuple in order."""
    text = _LAYOUT.sub("", hlo_type.strip())  # layouts hold no braces: {1,0:T(8,128)(2,1)S(1)}
    return re.findall(r"\w+\[[^\]]*\]", text) if text.startswith("(") else [text]


def instructions(hlo_text: str) -> dict[str, tuple[list[str], str, str]]:
    """{instruction name: (result types, opcode, jax op_name or "")} of an HLO module's text."""
    found = {}
    for line in hlo_text.splitlines():
        match = _INSTRUCTION.match(line)
        if match:
            op_name = _OP_NAME.search(line)
            source = op_name["op_name"] if op_name else ""
            found[match["name"]] = (_element_types(match["type"]), match["op"], source)
    return found


def _source(op_name: str) -> str:
    """The op_name without its jit(...) prefix and bracketed details."""
    return re.sub(r"\[.*", "", re.sub(r"^jit\([^)]*\)/", "", op_name))


def peak_groups(dump_dir: str, module: str = "train_step") -> list[dict]:
    """The values live at the memory peak of the `module` compiled into `dump_dir`, grouped (module
    docstring), largest first: [{gb (1e9 bytes), count, type, op, source}]. Of several matching modules, the one
    with the largest peak.

    Raises:
      FileNotFoundError: no live-range dump of `module` in `dump_dir`.
    """
    paths = sorted(glob.glob(f"{dump_dir}/*{module}*after_optimizations-live-range.txt"))
    if not paths:
        raise FileNotFoundError(
            f"{dump_dir} holds no live-range dump of {module}: compile with --xla_dump_to"
        )
    peaks = []
    for path in paths:
        with open(path) as f:
            values = live_at_peak(f.read())
        peaks.append((sum(size for *_, size in values), path, values))
    _, path, values = max(peaks)
    with open(path.replace("-live-range.txt", ".txt")) as f:
        defined = instructions(f.read())
    sizes: collections.Counter = collections.Counter()
    counts: collections.Counter = collections.Counter()
    for name, index, size in values:
        types, op, source = defined.get(name, (["?"], "?", ""))
        element = int(re.match(r"\{(\d*)", index)[1] or 0)
        key = (types[element] if element < len(types) else "?", op, _source(source))
        sizes[key] += size
        counts[key] += 1
    return [
        {"gb": size / 1e9, "count": counts[key], "type": key[0], "op": key[1], "source": key[2]}
        for key, size in sizes.most_common()
    ]
