"""The layers of docs/architecture.md hold: every import, those inside functions included, points down.

Three rules over the repository's packages (`apertus_jax`, `configs`, `experiments`, `benchmarks`, `tools`):
1. a unit (a top-level module of `apertus_jax`, a subpackage of it, a study of `apertus_jax.studies`, or an outer
   package) imports only units of lower layers and itself: no upward import and no import between units of one
   layer, hence no package cycle; the studies share the top layer of `apertus_jax`, so no core package imports a
   study and no study imports another;
2. no cycle between modules;
3. an import inside a function is of an optional extra only (the packages of `setup.py`'s extras, or a
   project module that needs one to import): no function-level import of the project's own modules or of a
   core dependency otherwise.
What a fresh process loads: importing the trainer loads no data kind, study or job; a run's metrics writer
imports no torch.
"""

import ast
import json
import os
import pathlib
import subprocess
import sys

import pytest

import apertus_jax

REPO = pathlib.Path(apertus_jax.__file__).parent.parent
PACKAGES = ("apertus_jax", "configs", "experiments", "benchmarks", "tools")
STUDIES = sorted(
    p.name for p in (REPO / "apertus_jax" / "studies").iterdir() if (p / "__init__.py").is_file()
)
LAYERS = (
    (
        "apertus_jax",
        "apertus_jax.checks",
        "apertus_jax.cache",
        "apertus_jax.extras",
        "apertus_jax.files",
        "apertus_jax.logs",
        "apertus_jax.named",
    ),
    ("apertus_jax.plots", "apertus_jax.pypi", "apertus_jax.tokenizers"),
    ("apertus_jax.models", "apertus_jax.optim"),
    ("apertus_jax.data",),
    ("apertus_jax.train", "apertus_jax.prep"),
    ("apertus_jax.eval", "apertus_jax.records"),
    ("apertus_jax.posttrain",),
    ("apertus_jax.config",),
    ("apertus_jax.trained", "apertus_jax.aot"),
    ("apertus_jax.jobs",),
    # Each study is a unit of its own (`unit_of`), all on one layer: a study imports the core, never another study,
    # and nothing below imports a study.
    ("apertus_jax.studies", *(f"apertus_jax.studies.{name}" for name in STUDIES)),
    ("configs",),
    ("experiments",),
    ("benchmarks",),
    ("tools",),
)
# Importable only with an extra of setup.py (hf, eval, wandb, prep, seqio, dev), or importing one when it is
# installed: imported where they are used.
OPTIONAL_EXTRAS = {
    "torch",
    "transformers",
    "accelerate",
    "lm_eval",
    "yaml",
    "wandb",
    "datatrove",
    "loguru",
    "multiprocess",
    "protego",
    "pyarrow",
    "orjson",
    "spacy",
    "seqio",
    "tensorflow",
    "tensorflow_text",
    "tensorflow_datasets",
    "robots",  # fast-robotstxt, the reference of the robots.txt tests
    "tensorboardX",  # imports torch (the hf extra) whenever it is installed
}
LAYER_OF = {unit: index for index, units in enumerate(LAYERS) for unit in units}


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for package in PACKAGES for p in (REPO / package).rglob("*.py")}


def unit_of(module: str) -> str:
    """The layered unit of a module: `apertus_jax.data.pipeline` -> `apertus_jax.data`; a study's module its
    study, `apertus_jax.studies.goldfish.study` -> `apertus_jax.studies.goldfish`."""
    parts = module.split(".")
    if parts[:2] == ["apertus_jax", "studies"] and len(parts) > 2:
        return ".".join(parts[:3])
    return ".".join(parts[:2]) if parts[0] == "apertus_jax" and len(parts) > 1 else parts[0]


def imports(path: pathlib.Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, inside a function) of every absolute import of a file."""
    tree = ast.parse(path.read_text(), str(path))
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.extend(
                    (f"{child.module}.{alias.name}", child.lineno, in_function) for alias in child.names
                )
            visit(child, inside)

    visit(tree, False)
    return found


def resolve(name: str, known: dict[str, pathlib.Path]) -> str | None:
    """The project module an import names (`from pkg import name` names `pkg.name` or `pkg`), else None."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [a, b, ..., a], or None (iterative depth-first search)."""
    state = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            child = next(stack[-1], None)
            if child is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(child) == 1:
                return path[path.index(child) :] + [child]
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append(iter(sorted(graph[child])))
    return None


def layer_violations(edges: list[tuple[str, str, str]]) -> list[str]:
    """`where: a -> b` for each import of unit b by unit a that does not point to a lower layer."""
    bad = []
    for where, source, target in edges:
        a, b = unit_of(source), unit_of(target)
        if a != b and LAYER_OF[b] >= LAYER_OF[a]:
            bad.append(f"{where}: {a} -> {b}")
    return bad


def extra_bound(known: dict[str, pathlib.Path]) -> set[str]:
    """The project modules that import an optional extra at module level, directly or through another."""
    direct = {name: [(i, f) for i, _, f in imports(path) if not f] for name, path in known.items()}
    bound = {
        name for name, found in direct.items() if any(i.split(".")[0] in OPTIONAL_EXTRAS for i, _ in found)
    }
    while True:
        more = {
            name
            for name, found in direct.items()
            if name not in bound and any(resolve(i, known) in bound for i, _ in found)
        }
        if not more:
            return bound
        bound |= more


def _project_edges():
    known = modules()
    bound = extra_bound(known)
    edges, function_level = [], []
    for name, path in known.items():
        for imported, line, in_function in imports(path):
            where = f"{path.relative_to(REPO)}:{line}"
            target = resolve(imported, known)
            if target is not None and target != name:
                edges.append((where, name, target))
            optional = imported.split(".")[0] in OPTIONAL_EXTRAS or target in bound
            if in_function and not optional:
                function_level.append(f"{where}: {imported}")
    return known, edges, function_level


def test_find_cycle_and_layer_rules_on_toy_graphs(tmp_path):
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    edges = [
        ("x.py:1", "apertus_jax.train.loop", "apertus_jax.data.pipeline"),  # down: fine
        ("x.py:2", "apertus_jax.data.pipeline", "apertus_jax.train.loop"),  # up
        ("x.py:3", "apertus_jax.train.loop", "apertus_jax.prep.steps"),  # same layer, other unit
        ("x.py:4", "apertus_jax.train.loop", "apertus_jax.train.step"),  # within a unit
        ("x.py:5", "apertus_jax.studies.goldfish.study", "apertus_jax.jobs.pretrain"),  # a study on the core
        ("x.py:6", "apertus_jax.jobs.pretrain", "apertus_jax.studies.goldfish.study"),  # the core on a study
        (
            "x.py:7",
            "apertus_jax.studies.memorization.study",
            "apertus_jax.studies.goldfish.formats",
        ),  # study on study
        (
            "x.py:8",
            "apertus_jax.studies.goldfish.study",
            "apertus_jax.studies.goldfish.formats",
        ),  # within a study
    ]
    assert layer_violations(edges) == [
        "x.py:2: apertus_jax.data -> apertus_jax.train",
        "x.py:3: apertus_jax.train -> apertus_jax.prep",
        "x.py:6: apertus_jax.jobs -> apertus_jax.studies.goldfish",
        "x.py:7: apertus_jax.studies.memorization -> apertus_jax.studies.goldfish",
    ]
    source = "import os\n\ndef f():\n    import torch\n    from apertus_jax.data import config\n"
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert imports(path) == [("os", 1, False), ("torch", 4, True), ("apertus_jax.data.config", 5, True)]


def test_every_unit_has_a_layer():
    known = modules()
    assert len(known) > 150 and "apertus_jax.train.run" in known
    assert {unit_of(m) for m in known} <= set(LAYER_OF), {unit_of(m) for m in known} - set(LAYER_OF)


def test_imports_point_down_the_layers():
    _, edges, _ = _project_edges()
    assert not layer_violations(edges), "\n".join(layer_violations(edges))


@pytest.mark.slow
def test_no_module_cycle():
    known, edges, _ = _project_edges()
    graph = {name: set() for name in known}
    for _, source, target in edges:
        graph[source].add(target)
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


@pytest.mark.slow
def test_function_level_imports_are_optional_extras_only():
    _, _, function_level = _project_edges()
    assert not function_level, "\n".join(function_level)


@pytest.mark.slow
def test_extra_bound_modules_are_found_through_their_imports():
    known = modules()
    bound = extra_bound(known)
    assert {
        "apertus_jax.data.seqio.import_tasks",
        "apertus_jax.trained.lm_eval",
        "apertus_jax.prep.steps",
    } <= bound
    assert "apertus_jax.train.loop" not in bound and "apertus_jax.data.pipeline" not in bound


# The loop knows only the loop: starting from a HF checkpoint is a job's `init_params` plug-in
# (`apertus_jax.jobs.pretrain.hf_params`), and the loss-spike guard reports through the optimizer
# (`apertus_jax.optim.config.RunOptimizer`). No module of the trainer imports them, by name either.
FEATURES = ("apertus_jax.models.hf", "apertus_jax.optim.spikes")


def feature_uses(edges: list[tuple[str, str, str]], named: dict[str, str]) -> list[str]:
    """`where: module -> feature` for each import of a `FEATURES` module by a trainer module (`edges`), and for
    each "module:attribute" name of one in a trainer module's code (`named`: {where: string})."""
    found = [
        f"{where}: {source} -> {target}"
        for where, source, target in edges
        if unit_of(source) == "apertus_jax.train" and target in FEATURES
    ]
    found += [f"{where}: {text}" for where, text in named.items() if text.split(":")[0] in FEATURES]
    return found


def _trainer_strings() -> dict[str, str]:
    """Every string constant of the trainer's code that names a module ("module" or "module:attribute")."""
    strings = {}
    for path in sorted((REPO / "apertus_jax" / "train").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith("apertus_jax.")
            ):
                strings[f"{path.relative_to(REPO)}:{node.lineno}"] = node.value
    return strings


def test_the_trainer_imports_no_feature():
    bad_edges = [("t.py:1", "apertus_jax.train.loop", "apertus_jax.models.hf")]
    bad_names = {"t.py:2": "apertus_jax.optim.spikes:skip_spikes"}
    good = [("t.py:3", "apertus_jax.jobs.pretrain", "apertus_jax.models.hf")]
    assert feature_uses(bad_edges + good, bad_names) == [
        "t.py:1: apertus_jax.train.loop -> apertus_jax.models.hf",
        "t.py:2: apertus_jax.optim.spikes:skip_spikes",
    ]
    _, edges, _ = _project_edges()
    assert not feature_uses(edges, _trainer_strings()), feature_uses(edges, _trainer_strings())


# The trainer's import closure: the loop, the step, the model, the optimizer factory and the typed config
# sections, and nothing loaded before a run uses it (`apertus_jax.named`): no data pipeline or tokenizer (the
# default data side, `apertus_jax.train.run.PIPELINE_SOURCE`), no data kind (`apertus_jax.data.kinds.BUILTIN_KINDS`),
# no optimizer (`apertus_jax.optim.factory.OPTIMIZERS`), no study (the canonical Goldfish hash) and no job.
TRAINER_IMPORT_BOUND = 36


@pytest.mark.slow
def test_importing_the_trainer_loads_no_kind_study_or_job():
    code = "import sys, apertus_jax.train.loop; print(' '.join(m for m in sys.modules if m.startswith('apertus_jax')))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=REPO
    )
    modules = set(loaded.stdout.split())
    assert "apertus_jax.train.loop" in modules and len(modules) <= TRAINER_IMPORT_BOUND, sorted(modules)
    absent_modules = (
        "data.megatron.indexed",
        "data.components",
        "data.memorization.probes",
        "data.memorization.sonnets",
        "data.memorization.canaries",
    )
    absent_modules += ("data.pipeline", "data.run_tokenizer", "data.goldfish.canonical", "tokenizers")
    absent_modules += ("optim.orthogonal", "optim.baselines")
    for absent in absent_modules:
        assert f"apertus_jax.{absent}" not in modules
    above = ("eval", "records", "posttrain", "prep", "config", "trained", "aot", "jobs", "studies")
    assert not any(m.split(".")[1] in above for m in modules if "." in m)


def test_the_tensorboard_writer_leaves_torch_unimported_and_importable(tmp_path):
    """tensorboardX imports torch where it is installed; a run's writer does without it (start-up time)."""
    program = (
        "import importlib.util, json, sys; from apertus_jax.train import metrics; "
        f"w = metrics.MetricsWriter({str(tmp_path)!r}, 2, 0); w.write_scalars(dict(step=1, loss=2.5)); w.close(); "
        "imported = 'torch' in sys.modules; "
        "importable = importlib.util.find_spec('torch') is None or bool(__import__('torch').tensor([1.0]).sum()); "
        "print(json.dumps([imported, importable]))"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[-1]) == [False, True]
    assert os.listdir(tmp_path / "tensorboard")
