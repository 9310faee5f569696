"""The indexes of the repository name exactly what is there, so that none can drift from the tree.

1. Every package of `apertus_jax` (a folder with `__init__.py`): its docstring opens with one line that is one
   sentence, and its bullet index (the lines that start with "- `a`, `b`: what they are") names each entry of
   the folder once, no more: its modules (without `.py`), sub-packages and data folders. Not entries:
   `__init__.py`, what git ignores (`__pycache__`, ...), hidden files, and `README.md`, a page for readers
   (a study's; rule 5 checks those).
2. README.md's "Layout": one bullet per package `apertus_jax/NAME/`, one for the top-level modules
   `apertus_jax/{a,b,...}.py` and one per top-level folder, exactly those, in the layer order of
   `tests/test_layers.py` (from the ground up).
3. README.md's "Commands": one table row per command `experiments/NAME.py` (all but `cli`), exactly those, each
   naming the library modules the command imports.
4. docs/architecture.md's diagram: one row per layer of `tests/test_layers.py`, top down.
5. Each study `apertus_jax/studies/NAME/` has a README.md that names its commands (the `experiments/` modules
   that import the study) and every file that names the study's package or commands (configs, measurements,
   docs, notebooks, tests), and every path it names exists.
6. No package holds more than `MAX_MODULES` modules (its `.py` files but `__init__.py`): a package is one idea a
   newcomer can name, and a larger one is several.

Each rule is shown failing on a made-up input before it runs on the repository.
"""

import ast
import fnmatch
import functools
import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "apertus_jax"
README = ROOT / "README.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
EXPERIMENTS = ROOT / "experiments"
# Files of a package folder that its index leaves out: the package's own file and a page for readers.
NOT_INDEXED = {"__init__.py", "README.md"}
# Commands of `experiments/` that are not commands: the package file and the shared entry point.
NOT_COMMANDS = {"__init__", "cli"}
MAX_MODULES = 15
# An index line: backticked names separated by ", ", a colon, then what they are.
INDEX_LINE = re.compile(r"- (?P<names>`[^`]+`(?:, `[^`]+`)*): \S")
NAME = re.compile(r"`([^`]+)`")
SENTENCE_BREAK = re.compile(r"[.?!] +[A-Z]")
# README "Layout" entries.
LAYOUT_PACKAGE = re.compile(r"apertus_jax/(\w+)/")
LAYOUT_MODULES = re.compile(r"apertus_jax/\{(\w+(?:,\w+)*)\}\.py")
LAYOUT_FOLDER = re.compile(r"(\w+)/")
# A row of the architecture diagram: unit names (`data/`, `tools/measure/`, `checks`) one or two spaces
# apart, three or more spaces, then what they are; a line that starts with a space continues the row above.
DIAGRAM_ROW = re.compile(r"(?P<names>[a-z_]+(?:/[a-z_]+)*/?(?: {1,2}[a-z_]+(?:/[a-z_]+)*/?)*) {3,}\S")
DIAGRAM_RULE = "── apertus_jax ──"
# Where the files that name a study live (the dated benchmark reports keep the names of their day; the
# results files under docs/results/ are generated; the checks at the top of tests/ are repository-wide).
STUDY_USERS = ("configs", "tools", "docs", "notebooks", "tests")
TEXT_SUFFIXES = (".py", ".md", ".ipynb", ".sh")
# A repository path a README names: `docs/memorization.md`, `tests/studies/goldfish/`.
REPOSITORY_PATH = re.compile(
    r"`((?:apertus_jax|experiments|configs|tools|docs|tests|notebooks|benchmarks|launch)/[\w./-]*)`"
)


@functools.cache
def _ignore_patterns(root: pathlib.Path) -> tuple[str, ...]:
    path = root / ".gitignore"
    lines = path.read_text().splitlines() if path.is_file() else []
    return tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def ignored(path: pathlib.Path, root: pathlib.Path = ROOT) -> bool:
    """A hidden file or folder, a virtual environment (a folder with `pyvenv.cfg`: docs/stacks.md's `python3.12 -m
    venv v312` in the clone), or one that `.gitignore` leaves out (`__pycache__/`, `*.egg-info/`, a top-level
    `/workdir*/`): a pattern that ends with "/" matches folders only, one that starts with "/" the root's."""
    if path.name.startswith(".") or (path / "pyvenv.cfg").is_file():
        return True
    for pattern in _ignore_patterns(root):
        if pattern.endswith("/") and not path.is_dir() or pattern.startswith("/") and path.parent != root:
            continue
        if fnmatch.fnmatch(path.name, pattern.strip("/")):
            return True
    return False


def ignored_below(path: pathlib.Path, root: pathlib.Path = ROOT) -> bool:
    """`path` or a folder above it, up to `root`, is ignored."""
    return any(ignored(p, root) for p in [path, *path.parents] if p != root and root in p.parents)


def entries(folder: pathlib.Path) -> set[str]:
    """What a package's index names: its modules without `.py`, its sub-packages and data folders."""
    return {
        path.stem if path.suffix == ".py" else path.name
        for path in folder.iterdir()
        if path.name not in NOT_INDEXED and not ignored(path)
    }


def packages() -> list[pathlib.Path]:
    """`apertus_jax` and every folder below it with an `__init__.py`."""
    return sorted(init.parent for init in PACKAGE.rglob("__init__.py") if not ignored_below(init.parent))


def docstring(folder: pathlib.Path) -> str | None:
    return ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))


def summary_problems(doc: str | None) -> list[str]:
    """What is wrong with a docstring's first line: it must be one sentence, alone on its line."""
    if not doc:
        return ["no docstring"]
    lines = doc.splitlines()
    first, problems = lines[0], []
    if len(lines) > 1 and lines[1].strip():
        problems.append(f"the first sentence goes on past the first line: {first!r}")
    if not first.endswith((".", "?")):
        problems.append(f"the first line is not a whole sentence: {first!r}")
    if SENTENCE_BREAK.search(first):
        problems.append(f"the first line holds more than one sentence: {first!r}")
    if len(first.split()) < 4:
        problems.append(f"the first line names no concept: {first!r}")
    return problems


def bullet_names(text: str) -> tuple[list[str], list[str]]:
    """(names, problems): the backticked names of every line that starts with "- `", in order; a line that
    starts so but is no index line ("- `a`, `b`: what they are") is a problem."""
    names, problems = [], []
    for line in text.splitlines():
        if not line.startswith("- `"):
            continue
        match = INDEX_LINE.match(line)
        if match:
            names += NAME.findall(match["names"])
        else:
            problems.append(f"not an index line (- `a`, `b`: what they are): {line!r}")
    return names, problems


def exact_problems(named: list[str], expected: set[str], what: str) -> list[str]:
    """Names missing from `named`, named but not expected, and named twice."""
    problems = [f"{what}: `{n}` is not named" for n in sorted(expected - set(named))]
    problems += [f"{what}: `{n}` is named but does not exist" for n in sorted(set(named) - expected)]
    problems += [f"{what}: `{n}` is named twice" for n in sorted({n for n in named if named.count(n) > 1})]
    return problems


def index_problems(doc: str | None, folder_entries: set[str], where: str = "") -> list[str]:
    """Rule 1 for one package: its docstring's first line and its index against the folder's entries."""
    problems = [f"{where}: {p}" for p in summary_problems(doc)]
    names, malformed = bullet_names(doc or "")
    problems += [f"{where}: {p}" for p in malformed]
    return problems + exact_problems(names, folder_entries, f"{where} index")


def section(text: str, title: str) -> str:
    """The body of the Markdown section `## title` ('' if there is none)."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    return match[1] if match else ""


@functools.cache
def layers() -> tuple[tuple[str, ...], ...]:
    """`LAYERS` of tests/test_layers.py, from the ground up: the one truth about the layers."""
    spec = importlib.util.spec_from_file_location("layers_of_the_tests", ROOT / "tests" / "test_layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LAYERS


def layer_of(unit: str) -> int:
    """The layer of a unit (`apertus_jax.data`, `configs`); units outside the layers (launch, docs) come last."""
    return next((i for i, units in enumerate(layers()) if unit in units), len(layers()))


def layout_units(layout: str) -> tuple[list[list[str]], list[str]]:
    """(units per bullet, problems) of README's "Layout": `apertus_jax/data/` -> apertus_jax.data,
    `apertus_jax/{checks,cache}.py` -> apertus_jax.checks and apertus_jax.cache, `tools/` -> tools."""
    names, problems = bullet_names(layout)
    bullets = [line for line in layout.splitlines() if line.startswith("- `") and INDEX_LINE.match(line)]
    units = []
    for line in bullets:
        named = NAME.findall(INDEX_LINE.match(line)["names"])
        if len(named) != 1:
            problems.append(f"one bullet per package or folder: {line!r}")
            continue
        if m := LAYOUT_PACKAGE.fullmatch(named[0]):
            units.append([f"apertus_jax.{m[1]}"])
        elif m := LAYOUT_MODULES.fullmatch(named[0]):
            units.append([f"apertus_jax.{n}" for n in m[1].split(",")])
        elif m := LAYOUT_FOLDER.fullmatch(named[0]):
            units.append([m[1]])
        else:
            problems.append(f"not a package, the top-level modules or a top-level folder: `{named[0]}`")
    return units, problems


def layout_problems(readme: str, root: pathlib.Path = ROOT) -> list[str]:
    """Rule 2: the README's layout against the packages, modules and folders of `root`, in layer order."""
    layout = section(readme, "Layout")
    if not layout:
        return ["README.md has no section `## Layout`"]
    units, problems = layout_units(layout)
    package = root / "apertus_jax"
    expected = {
        f"apertus_jax.{p.name}"
        for p in package.iterdir()
        if (p / "__init__.py").is_file() and not ignored(p, root)
    }
    expected |= {f"apertus_jax.{p.stem}" for p in package.glob("*.py") if p.name != "__init__.py"}
    expected |= {
        p.name for p in root.iterdir() if p.is_dir() and p.name != "apertus_jax" and not ignored(p, root)
    }
    problems += exact_problems([u for group in units for u in group], expected, "README.md Layout")
    for before, after in zip(units, units[1:]):
        if min(map(layer_of, after)) < min(map(layer_of, before)):
            problems.append(f"README.md Layout: {after} (a lower layer) comes after {before}")
    return problems


def command_rows(text: str) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """({command: the modules its row names}, commands in order, problems) of README's "Commands" table:
    rows "| `name` | what it does | `module`, `module` |"."""
    rows, order, problems = {}, [], []
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        name = NAME.fullmatch(cells[0])
        modules = NAME.findall(cells[-1]) if len(cells) == 3 else []
        if not name or not modules:
            problems.append(f"not a command row (| `name` | what it does | `module` |): {line!r}")
            continue
        rows[name[1]] = modules
        order.append(name[1])
    return rows, order, problems


def imported_modules(path: pathlib.Path) -> set[str]:
    """Every module a file imports, in functions too (`from a.b import c` imports a.b and a.b.c)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def module_exists(name: str, root: pathlib.Path = ROOT) -> bool:
    base = root.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def commands_problems(readme: str, experiments: pathlib.Path = EXPERIMENTS) -> list[str]:
    """Rule 3: the README's command table against `experiments/*.py`: each command once, with modules of the
    repository that the command imports."""
    table = section(readme, "Commands")
    if not table:
        return ["README.md has no section `## Commands`"]
    rows, order, problems = command_rows(table)
    expected = {p.stem for p in experiments.glob("*.py")} - NOT_COMMANDS
    problems += exact_problems(order, expected, "README.md Commands")
    for command, modules in rows.items():
        path = experiments / f"{command}.py"
        if not path.is_file():
            continue
        imported = imported_modules(path)
        for module in modules:
            if not module_exists(module, experiments.parent):
                problems.append(f"README.md Commands: `{command}` names `{module}`, which is no module")
            elif module not in imported:
                problems.append(f"README.md Commands: `{command}` does not import `{module}`")
    return problems


def diagram_rows(page: str) -> tuple[list[set[str]], list[str]]:
    """(units per row, top down; problems) of the first code block of docs/architecture.md: rows above the
    rule `── apertus_jax ──` are outer packages (`tools/measure/` is tools), rows below it packages and modules
    of apertus_jax (`data/`, `checks`)."""
    block = re.search(r"^```\n(.*?)^```", page, re.MULTILINE | re.DOTALL)
    if not block:
        return [], ["no diagram (a code block without a language)"]
    rows, problems, inside = [], [], False
    for line in block[1].splitlines():
        if DIAGRAM_RULE in line:
            inside = True
            continue
        if not line or line[0] == " ":
            continue
        match = DIAGRAM_ROW.match(line)
        if not match:
            problems.append(f"not a row of the diagram (names, 3 spaces, what they are): {line!r}")
            continue
        names = match["names"].split()
        if inside:
            rows.append({f"apertus_jax.{n.strip('/')}" for n in names})
        else:
            rows.append({n.split("/")[0] for n in names})
    return rows, problems


def diagram_problems(page: str, layering: tuple[tuple[str, ...], ...] | None = None) -> list[str]:
    """Rule 4: the diagram's rows are the layers (those of tests/test_layers.py unless given), top down; the
    package `apertus_jax` itself is the rule, and the studies are the one row `studies/`."""
    rows, problems = diagram_rows(page)
    expected = [
        {u for u in units if u != "apertus_jax" and not u.startswith("apertus_jax.studies.")}
        for units in reversed(layering or layers())
    ]
    if rows != expected:
        shown, wanted = [sorted(r) for r in rows], [sorted(e) for e in expected]
        problems.append(f"the diagram's rows {shown} are not the layers {wanted}")
    return problems


def study_commands(study: str, experiments: pathlib.Path = EXPERIMENTS) -> list[str]:
    """The commands that import the study's package or one of its modules."""
    package = f"apertus_jax.studies.{study}"
    return sorted(
        p.stem
        for p in experiments.glob("*.py")
        if any(m == package or m.startswith(package + ".") for m in imported_modules(p))
    )


def study_users(study: str, commands: list[str], root: pathlib.Path = ROOT) -> set[str]:
    """Files (from the root) of `STUDY_USERS` that name the study's package or one of its commands."""
    names = [rf"apertus_jax[./]studies[./]{study}\b", *(rf"experiments[./]{c}\b" for c in commands)]
    pattern = re.compile("|".join(names))
    found = set()
    for folder in STUDY_USERS:
        for path in (root / folder).rglob("*"):
            relative = path.relative_to(root)
            if ignored_below(path, root) or not path.name.endswith(TEXT_SUFFIXES):
                continue
            if (
                relative.parts[:2] == ("docs", "results")
                or relative.parts[0] == "tests"
                and len(relative.parts) == 2
            ):
                continue
            if pattern.search(path.read_text(encoding="utf-8", errors="replace")):
                found.add(relative.as_posix())
    return found


def study_readme_problems(
    readme: str, commands: list[str], users: set[str], root: pathlib.Path = ROOT, where: str = ""
) -> list[str]:
    """Rule 5 for one study: its README names its commands and users, and every path it names exists."""
    problems = [
        f"{where}: names no `experiments/{c}.py`" for c in commands if f"experiments/{c}.py" not in readme
    ]
    problems += [f"{where}: names no `{u}` (it names the study)" for u in sorted(users) if u not in readme]
    for path in REPOSITORY_PATH.findall(readme):
        if not (root / path).exists():
            problems.append(f"{where}: `{path}` does not exist")
    return problems


# Each rule on made-up inputs: it fails where it should, and passes the good input.


def test_a_first_line_of_two_sentences_or_cut_off_fails():
    assert summary_problems("The data pipeline: kinds, packing and masks.\n\n- `a`: A.") == []
    assert summary_problems("Goldfish: which tokens drop? Docs below.") == [
        "the first line holds more than one sentence: 'Goldfish: which tokens drop? Docs below.'"
    ]
    assert summary_problems("The training data pipeline: documents packed into\nrows.") == [
        "the first sentence goes on past the first line: 'The training data pipeline: documents packed into'",
        "the first line is not a whole sentence: 'The training data pipeline: documents packed into'",
    ]
    assert summary_problems("Data.") == ["the first line names no concept: 'Data.'"]
    assert summary_problems(None) == ["no docstring"]


def test_an_index_that_misses_adds_repeats_or_misformats_an_entry_fails(tmp_path):
    folder = tmp_path / "pkg"
    (folder / "sub").mkdir(parents=True)
    (folder / "assets").mkdir()
    for name in (
        "__init__.py",
        "alpha.py",
        "beta.py",
        "workdir.py",
        "README.md",
        "sub/__init__.py",
        ".hidden",
    ):
        (folder / name).write_text("")
    (folder / "__pycache__").mkdir()
    # .gitignore's `/workdir*/` is a top-level folder, not a module named so
    assert entries(folder) == {"alpha", "beta", "workdir", "sub", "assets"}
    good = (
        "A package of toy modules for the test.\n\n- `alpha`, `beta`, `workdir`: the modules;\n- `sub`: one;\n"
        "- `assets`: data."
    )
    assert index_problems(good, entries(folder), "pkg") == []
    bad = (
        "A package of toy modules for the test.\n\n- `alpha`: a module;\n- `alpha`: again;\n"
        "- `gamma`: gone;\n- `sub` and `assets`: no index line;\n  - `beta`: indented, not an index line."
    )
    assert index_problems(bad, entries(folder), "pkg") == [
        "pkg: not an index line (- `a`, `b`: what they are): '- `sub` and `assets`: no index line;'",
        "pkg index: `assets` is not named",
        "pkg index: `beta` is not named",
        "pkg index: `sub` is not named",
        "pkg index: `workdir` is not named",
        "pkg index: `gamma` is named but does not exist",
        "pkg index: `alpha` is named twice",
    ]


def _toy_repository(root: pathlib.Path) -> None:
    for folder in ("apertus_jax/data", "apertus_jax/train", "configs", "docs", "workdir_x", ".ci"):
        (root / folder).mkdir(parents=True)
    for name in ("apertus_jax/__init__.py", "apertus_jax/data/__init__.py", "apertus_jax/train/__init__.py"):
        (root / name).write_text("")
    (root / "apertus_jax" / "checks.py").write_text("")
    (root / ".gitignore").write_text("/workdir*/\n")
    (root / "v312").mkdir()  # a virtual environment made in the clone: no folder of the repository
    (root / "v312" / "pyvenv.cfg").write_text("home = /usr/bin\n")


def test_a_layout_that_misses_adds_or_misorders_a_package_or_folder_fails(tmp_path):
    _toy_repository(tmp_path)
    good = (
        "## Layout\n\nText.\n\n- `apertus_jax/{checks}.py`: checks\n- `apertus_jax/data/`: the data\n"
        "- `apertus_jax/train/`: the trainer\n- `configs/`: configs\n- `docs/`: the docs\n\n## Next\n"
    )
    assert layout_problems(good, tmp_path) == []
    bad = (
        "## Layout\n\n- `apertus_jax/train/`: the trainer\n- `apertus_jax/data/`: the data\n"
        "- `apertus_jax/{checks,files}.py`: modules\n- `configs/`, `docs/`: two at once\n- `launch/`: gone\n"
        "- `README.md`: a file\n"
    )
    assert layout_problems(bad, tmp_path) == [
        "one bullet per package or folder: '- `configs/`, `docs/`: two at once'",
        "not a package, the top-level modules or a top-level folder: `README.md`",
        "README.md Layout: `configs` is not named",
        "README.md Layout: `docs` is not named",
        "README.md Layout: `apertus_jax.files` is named but does not exist",
        "README.md Layout: `launch` is named but does not exist",
        "README.md Layout: ['apertus_jax.data'] (a lower layer) comes after ['apertus_jax.train']",
        "README.md Layout: ['apertus_jax.checks', 'apertus_jax.files'] (a lower layer) comes after "
        "['apertus_jax.data']",
    ]
    assert layout_problems("# No layout\n", tmp_path) == ["README.md has no section `## Layout`"]


def test_a_command_table_that_misses_adds_or_misnames_a_command_or_module_fails(tmp_path):
    experiments = tmp_path / "experiments"
    (tmp_path / "apertus_jax" / "jobs").mkdir(parents=True)
    experiments.mkdir()
    for name in ("apertus_jax/__init__.py", "apertus_jax/jobs/__init__.py", "apertus_jax/jobs/pretrain.py"):
        (tmp_path / name).write_text("")
    (experiments / "cli.py").write_text("")
    (experiments / "__init__.py").write_text("")
    (experiments / "pretrain.py").write_text("from apertus_jax.jobs.pretrain import pretrain\n")
    (experiments / "evaluate.py").write_text("def main():\n    import apertus_jax.jobs.pretrain\n")
    good = (
        "## Commands\n\n| command | what it does | module |\n| --- | --- | --- |\n"
        "| `pretrain` | trains | `apertus_jax.jobs.pretrain` |\n| `evaluate` | scores | `apertus_jax.jobs.pretrain` |\n"
    )
    assert commands_problems(good, experiments) == []
    bad = (
        "## Commands\n\n| `pretrain` | trains | `apertus_jax.jobs.pretraining` |\n"
        "| `megatron_samples` | gone | `apertus_jax.jobs.pretrain` |\n| `pretrain` | twice | `apertus_jax.jobs.pretrain` |\n"
        "| `sft` | no module |\n"
    )
    assert commands_problems(bad, experiments) == [
        "not a command row (| `name` | what it does | `module` |): '| `sft` | no module |'",
        "README.md Commands: `evaluate` is not named",
        "README.md Commands: `megatron_samples` is named but does not exist",
        "README.md Commands: `pretrain` is named twice",
    ]
    bad = "## Commands\n\n| `pretrain` | trains | `apertus_jax.jobs.pretraining` |\n| `evaluate` | scores | `apertus_jax.jobs` |\n"
    assert commands_problems(bad, experiments) == [
        "README.md Commands: `pretrain` names `apertus_jax.jobs.pretraining`, which is no module",
        "README.md Commands: `evaluate` does not import `apertus_jax.jobs`",
    ]


TOY_LAYERS = (
    ("apertus_jax", "apertus_jax.checks", "apertus_jax.cache"),
    ("apertus_jax.data",),
    ("apertus_jax.train", "apertus_jax.prep"),
    ("apertus_jax.studies", "apertus_jax.studies.goldfish"),
    ("configs",),
    ("tools",),
)
TOY_DIAGRAM = """# Layers

```
tools/measure/   the measured figures
configs/         run configs
──────────── apertus_jax ──
studies/         one folder per study
train/ prep/     the trainer | data preparation
                 (a row goes on on lines that start with a space)
data/            the data pipeline
checks  cache    range checks | the cache folder
```
"""


def test_a_diagram_whose_rows_are_not_the_layers_fails():
    assert diagram_problems(TOY_DIAGRAM, TOY_LAYERS) == []
    swapped = (
        TOY_DIAGRAM.replace("data/ ", "xxxx")
        .replace("checks  cache", "data/        ")
        .replace("xxxx", "checks cache")
    )
    assert diagram_problems(swapped, TOY_LAYERS) == [
        "the diagram's rows [['tools'], ['configs'], ['apertus_jax.studies'], ['apertus_jax.prep', "
        "'apertus_jax.train'], ['apertus_jax.cache', 'apertus_jax.checks'], ['apertus_jax.data']] are not the "
        "layers [['tools'], ['configs'], ['apertus_jax.studies'], ['apertus_jax.prep', 'apertus_jax.train'], "
        "['apertus_jax.data'], ['apertus_jax.cache', 'apertus_jax.checks']]"
    ]
    assert diagram_problems(TOY_DIAGRAM.replace("train/ prep/", "train/      "), TOY_LAYERS)
    assert diagram_problems(TOY_DIAGRAM.replace("data/   ", "data/: "), TOY_LAYERS)[0] == (
        "not a row of the diagram (names, 3 spaces, what they are): 'data/:          the data pipeline'"
    )


def test_a_study_readme_that_misses_a_file_or_names_a_missing_one_fails(tmp_path):
    for name in (
        "experiments/memorization.py",
        "configs/studies/tiny.py",
        "tests/studies/memorization/test_study.py",
        "tests/test_layers.py",
        "docs/memorization.md",
        "docs/results/memorization.json",
        "tools/measure/other.py",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "experiments" / "memorization.py").write_text(
        "from apertus_jax.studies.memorization.study import run\n"
    )
    (tmp_path / "experiments" / "other.py").write_text("from apertus_jax.studies.goldfish import study\n")
    (tmp_path / "configs" / "studies" / "tiny.py").write_text('"""python -m experiments.memorization"""\n')
    (tmp_path / "tests" / "studies" / "memorization" / "test_study.py").write_text(
        "from apertus_jax.studies.memorization import study\n"
    )
    (tmp_path / "tests" / "test_layers.py").write_text(
        '"apertus_jax.studies.memorization.study"\n'
    )  # repository-wide
    (tmp_path / "docs" / "memorization.md").write_text("Run `python -m experiments.memorization`.\n")
    (tmp_path / "docs" / "results" / "memorization.json").write_text(
        '{"command": "python -m experiments.memorization"}'
    )
    (tmp_path / "tools" / "measure" / "other.py").write_text("python -m experiments.memorizations\n")
    commands = study_commands("memorization", tmp_path / "experiments")
    users = study_users("memorization", commands, tmp_path)
    assert commands == ["memorization"]
    assert users == {
        "configs/studies/tiny.py",
        "tests/studies/memorization/test_study.py",
        "docs/memorization.md",
    }
    good = (
        "# The study\n\n- `experiments/memorization.py`\n- `configs/studies/tiny.py`\n- `docs/memorization.md`\n"
        "- `tests/studies/memorization/test_study.py`\n"
    )
    assert study_readme_problems(good, commands, users, tmp_path, "m") == []
    bad = good.replace("- `configs/studies/tiny.py`\n", "- `configs/studies/small.py`\n")
    assert study_readme_problems(bad, commands, users, tmp_path, "m") == [
        "m: names no `configs/studies/tiny.py` (it names the study)",
        "m: `configs/studies/small.py` does not exist",
    ]
    assert study_readme_problems(
        good.replace("experiments/memorization.py", "x"), commands, users, tmp_path, "m"
    ) == ["m: names no `experiments/memorization.py`"]


# The rules on the repository.


def test_every_package_docstring_opens_with_one_sentence_and_indexes_its_folder():
    found = packages()
    assert len(found) > 20 and PACKAGE in found and PACKAGE / "studies" / "memorization" in found
    problems = []
    for folder in found:
        problems += index_problems(docstring(folder), entries(folder), str(folder.relative_to(ROOT)))
    assert not problems, "\n".join(problems)


def test_the_readme_layout_names_every_package_module_and_folder_in_layer_order():
    problems = layout_problems(README.read_text())
    assert not problems, "\n".join(problems)


def test_the_readme_command_table_names_every_command_and_what_it_imports():
    problems = commands_problems(README.read_text())
    assert not problems, "\n".join(problems)


def test_the_architecture_diagram_shows_the_layers():
    rows, _ = diagram_rows(ARCHITECTURE.read_text())
    assert len(rows) == len(layers()) and rows[-1] >= {"apertus_jax.checks", "apertus_jax.named"}
    problems = diagram_problems(ARCHITECTURE.read_text())
    assert not problems, "\n".join(problems)


STUDIES = sorted(p.name for p in (PACKAGE / "studies").iterdir() if (p / "__init__.py").is_file())


def test_the_studies_are_found():
    assert STUDIES == ["ablations", "distillation", "goldfish", "memorization"]
    assert study_commands("goldfish") == ["goldfish_formats", "goldfish_study"]


@pytest.mark.parametrize("study", STUDIES)
def test_every_study_has_a_readme_naming_every_file_that_names_it(study):
    folder = PACKAGE / "studies" / study
    assert (folder / "README.md").is_file(), f"{study}: no README.md"
    assert "README.md" in docstring(folder).splitlines()[0]
    commands = study_commands(study)
    users = study_users(study, commands)
    assert commands and any(u.startswith(f"tests/studies/{study}/") for u in users)
    readme = (folder / "README.md").read_text()
    problems = study_readme_problems(readme, commands, users, where=f"apertus_jax/studies/{study}/README.md")
    assert not problems, "\n".join(problems)


def module_count_problems(folders: list[pathlib.Path]) -> list[str]:
    """`folder: N modules` for each package folder of more than `MAX_MODULES` modules."""
    counts = {folder: len([p for p in folder.glob("*.py") if p.name != "__init__.py"]) for folder in folders}
    return [f"{folder.name}: {n} modules" for folder, n in counts.items() if n > MAX_MODULES]


def test_a_package_of_more_than_fifteen_modules_fails(tmp_path):
    for n, name in ((MAX_MODULES, "fits"), (MAX_MODULES + 1, "grab_bag")):
        (tmp_path / name).mkdir()
        for i in range(n):
            (tmp_path / name / f"m{i}.py").write_text("")
        (tmp_path / name / "__init__.py").write_text("")
    assert module_count_problems([tmp_path / "fits", tmp_path / "grab_bag"]) == [
        f"grab_bag: {MAX_MODULES + 1} modules"
    ]


def test_no_package_holds_more_than_fifteen_modules():
    assert len(packages()) > 20
    assert not module_count_problems(packages()), module_count_problems(packages())
