"""The README's commands name what exists: every `python -m MODULE` is a module of the repository, every
`--config=PATH` is a file, and every `--flag` given to a repository job is a flag that job defines."""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
# Modules of installed tools, not of this repository.
EXTERNAL_MODULES = {"pytest", "pip"}
# The config file the README tells the reader to write (section "Your own data").
USER_CONFIGS = {"configs/my_run.py"}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`(python -m [^`]+)`")
COMMAND = re.compile(r"python -m ([\w.]+)(.*)")
FLAG = re.compile(r"(?<![\w-])--([a-z_][\w]*)(?=[=\s\]]|$)")
CONFIG_PATH = re.compile(r"--config=(\S+\.py)")
# How the jobs define flags: absl (`flags.DEFINE_string("out", ...)`, `config_flags.DEFINE_config_file(...)`)
# or argparse (`parser.add_argument("--out", ...)`).
DEFINED = re.compile(r"DEFINE_\w+\(\s*\"(\w+)\"|add_argument\(\s*\"--(\w+)\"")
# A job that runs another job's main with its flags (`from experiments import pretrain`).
JOB_IMPORT = re.compile(r"^\s*from (experiments|benchmarks) import ([\w, ]+)$", re.MULTILINE)


def readme() -> str:
    with open(README, encoding="utf-8") as f:
        return f.read()


def commands(text: str) -> list[str]:
    """`python -m ...` command lines of the fenced bash blocks (continuation lines joined) and inline spans."""
    found = []
    for language, body in FENCE.findall(text):
        if language not in ("bash", "sh", ""):
            continue
        for line in body.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0]  # drop trailing comments
            found.extend(m.group(0) for m in COMMAND.finditer(line))
    found.extend(INLINE.findall(text))
    return found


def module_file(module: str) -> str | None:
    """The repository file that `python -m module` runs, or None."""
    base = os.path.join(ROOT, *module.split("."))
    for candidate in (base + ".py", os.path.join(base, "__main__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


def defined_flags(path: str) -> set[str]:
    """Flags `path` defines, with those of the repository jobs it runs (`from experiments import pretrain`)."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    flags = {a or b for a, b in DEFINED.findall(source)}
    for package, names in JOB_IMPORT.findall(source):
        for name in re.split(r"\s*,\s*", names.strip()):
            imported = module_file(f"{package}.{name}")
            if imported and imported != path:
                flags |= defined_flags(imported)
    return flags


def test_commands_are_found_in_fenced_blocks_and_inline_spans():
    text = (
        "Run `python -m experiments.evaluate --task=x` now.\n"
        "```bash\npython -m experiments.pretrain --config=c.py \\\n    --workdir=/tmp/w  # a comment --nope\n```\n"
        "```python\npython -m not.a.shell.block\n```\n"
    )
    assert commands(text) == [
        "python -m experiments.pretrain --config=c.py      --workdir=/tmp/w",
        "python -m experiments.evaluate --task=x",
    ]
    assert FLAG.findall("--config=c.py --config.train.steps=3 [--top_p=0.9] --include_path x") == [
        "config",
        "top_p",
        "include_path",
    ]


def test_the_readme_has_commands():
    assert len(commands(readme())) >= 20


@pytest.mark.parametrize("command", commands(readme()))
def test_every_readme_command_names_an_existing_module_config_and_flags(command):
    module, arguments = COMMAND.match(command).groups()
    if module in EXTERNAL_MODULES:
        return
    path = module_file(module)
    assert path, f"README: `python -m {module}` is not a module of the repository"
    for config in set(CONFIG_PATH.findall(arguments)) - USER_CONFIGS:
        assert os.path.isfile(os.path.join(ROOT, config)), f"README: {config} does not exist ({command})"
    if module.startswith(("experiments.", "benchmarks.")):
        unknown = set(FLAG.findall(arguments)) - defined_flags(path)
        assert not unknown, f"README: `python -m {module}` has no flag {sorted(unknown)}"
