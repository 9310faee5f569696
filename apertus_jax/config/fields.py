"""Every `--config.*` field of the run schema with its value, type, range and meaning, generated from the schema.

    print(format_fields(config_fields(config)))   # what `--config_fields` of a training command prints

Nothing here is typed twice: the keys and values are those of the config (`base_config()` for the defaults),
the types are the annotations of the section dataclasses (`RunConfig`, `Config`), the meaning is the field's
entry in its dataclass's docstring (an `Attributes:` entry, an aligned `name  text` line of the section
module's docstring, or the clause that names it), and the range is the one the section's own check states:
each field is set to a value outside any range (-1e30, 1e30, a string no choice has) and the config parsed,
and the check's message ("train.steps must be a positive integer, got ...") gives the range.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import re
import sys
import textwrap
import typing
from typing import Any

import ml_collections

from apertus_jax.config.schema import Config, parse
from apertus_jax.train.config import RunConfig

# A value no range or choice admits, tried in this order (numbers: below, then above, any bound).
_PROBES = {int: (-(10**30), 10**30), float: (-1e30, 1e30), str: ("\0?",)}
WIDTH = 110  # of the listing's meaning lines
_RANGE = re.compile(r"(?:must be|is not) (.*?)(?:, got .*)?$")


@dataclasses.dataclass(frozen=True)
class Field:
    """One field: `key` ("train.steps"), its `value` in the config, `type` (annotation text), `range` (the
    check's words, "" when any value of the type is accepted) and `meaning` (one line)."""

    key: str
    value: Any
    type: str
    range: str
    meaning: str


def section_classes() -> dict[str, type]:
    """{section: its dataclass} of the schema: `RunConfig`'s sections and those of the jobs (`Config`)."""
    classes = typing.get_type_hints(RunConfig) | typing.get_type_hints(Config)
    return {name: cls for name, cls in classes.items() if dataclasses.is_dataclass(cls)}


def _type_name(annotation: Any) -> str:
    name = getattr(annotation, "__name__", None)
    if name and not getattr(annotation, "__args__", None):
        return name
    return re.sub(r"\btyping\.|\b[\w.]+\.(?=\w)", "", str(annotation))


def _documented(doc: str) -> dict[str, str]:
    """{name: text} of the `Attributes:` entries (`a, b_*: text`, continued on deeper-indented lines) and of
    aligned `name   text` lines of a docstring."""
    entries: dict[str, str] = {}
    current: list[str] = []
    indent = 0
    for line in doc.splitlines():
        stripped, depth = line.strip(), len(line) - len(line.lstrip())
        if current and stripped and depth > indent:
            for name in current:
                entries[name] += " " + stripped
            continue
        entry = re.match(r"([\w*]+(?:, [\w*]+)*): (.*)", stripped) or re.match(r"(\w+) {2,}(\S.*)", line)
        current, indent = [], depth
        if entry:
            current = [name.strip() for name in entry.group(1).split(",")]
            entries.update(dict.fromkeys(current, entry.group(2).strip()))
    return entries


def _clauses(text: str, separators: str) -> list[str]:
    """`text` split after any of `separators` (";" or ".") outside parentheses and before a space."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char in separators and depth == 0 and text[i + 1 : i + 2] in (" ", ""):
            parts.append(text[start : i + 1].strip())
            start = i + 1
    return [part for part in [*parts, text[start:].strip()] if part]


def _first_sentence(text: str) -> str:
    """The first sentence of `text`, without a leading "The `section` section: "."""
    text = re.sub(r"^The `\w+` section(?: of a run)?: ", "", " ".join(text.split()))
    return _clauses(text, ".")[0].rstrip(".") if text else ""


def meaning(cls: type, name: str) -> str:
    """One line on field `name` of the section dataclass `cls` (module docstring), or ""."""
    docs = [inspect.getdoc(cls) or "", inspect.getdoc(sys.modules[cls.__module__]) or ""]
    for doc in docs:
        for pattern, text in _documented(doc).items():
            if re.fullmatch(pattern.replace("*", r"\w*"), name):
                return _first_sentence(text)
    for doc in docs:
        for clause in _clauses(" ".join(doc.split()), ";."):
            if re.search(rf"`{name}\b", clause):
                return _first_sentence(clause.rstrip(";"))
    return _first_sentence(docs[0].split("\n\n")[0])


def _set(config: ml_collections.ConfigDict, key: str, value: Any) -> ml_collections.ConfigDict:
    tree = copy.deepcopy(config.to_dict())
    node = tree
    *path, last = key.split(".")
    for part in path:
        node = node[part]
    node[last] = value
    return ml_collections.ConfigDict(tree)


def value_range(config: ml_collections.ConfigDict, key: str, value: Any) -> str:
    """The range the schema's checks state for `key` (module docstring), or "" when none refuses a probe."""
    if isinstance(value, bool):
        return "True or False"
    for probe in _PROBES.get(type(value), ()):
        try:
            parse(_set(config, key, probe))
        except ValueError as error:
            message = str(error)
            found = _RANGE.search(message)
            if found and re.match(rf"{re.escape(key)}\b", message):
                return found.group(1)
    return ""


def config_fields(config: ml_collections.ConfigDict) -> list[Field]:
    """Every field of the run config `config` (a ConfigDict of the `base_config()` schema), in schema order;
    `data.pipeline` is one field (its parts: `apertus_jax/data/config.py`)."""
    classes = section_classes()
    fields = []
    for section, value in config.items():
        items = value.items() if section in classes else [(None, value)]
        for name, field_value in items:
            key = section if name is None else f"{section}.{name}"
            cls, attribute = (RunConfig, section) if name is None else (classes[section], name)
            if key == "model.preset":
                cls, attribute = Config, "model_preset"
            hints = typing.get_type_hints(cls)
            plain = field_value.to_dict() if hasattr(field_value, "to_dict") else field_value
            fields.append(
                Field(
                    key=key,
                    value=plain,
                    type=_type_name(hints[attribute]),
                    range="" if key == "data.pipeline" else value_range(config, key, plain),
                    meaning=meaning(cls, attribute),
                )
            )
    return fields


def _shown(field: Field) -> str:
    if field.key == "data.pipeline":
        return "{" + ", ".join(f"{k}: ..." for k in field.value) + "}"
    return repr(field.value)


def format_fields(fields: list[Field]) -> str:
    """The listing: per field `--config.KEY=VALUE  TYPE; RANGE` and its meaning indented below."""
    lines = []
    for field in fields:
        kind = f"{field.type}; {field.range}" if field.range else field.type
        lines += [f"--config.{field.key}={_shown(field)}  ({kind})"]
        lines += textwrap.wrap(field.meaning, WIDTH, initial_indent="    ", subsequent_indent="    ")
    return "\n".join(lines)
