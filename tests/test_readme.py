"""The documented commands name what exists: in README.md, BENCHMARKS.md and every page of docs/, every
`python -m MODULE` is a module of the repository, every `--config=PATH` is a file, and every `--flag` given to a
repository job is a flag that job defines. The own-data path of "Your own data" (docs/usage.md) runs as the page
shows it."""

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
BENCHMARKS = os.path.join(ROOT, "BENCHMARKS.md")
DOCS = os.path.join(ROOT, "docs")
# The page that holds "Your own data" (the README's "Using the pieces" links to it).
USAGE = os.path.join(DOCS, "usage.md")
# Modules of installed tools, not of this repository.
EXTERNAL_MODULES = {"pytest", "pip"}
# Commands whose arguments are another program's (lm-eval's, checked by tests/experiments/test_lm_eval.py).
PASSTHROUGH_MODULES = {"experiments.lm_eval"}
# The config file docs/usage.md tells the reader to write (section "Your own data").
USER_CONFIGS = {"configs/my_run.py"}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`(python -m [^`]+)`")
COMMAND = re.compile(r"python -m ([\w.]+)(.*)")
FLAG = re.compile(r"(?<![\w-])--([a-z_][\w]*)(?=[=\s\]]|$)")
CONFIG_PATH = re.compile(r"--config=(\S+\.py)")
# How the jobs define flags: absl (`flags.DEFINE_string("out", ...)`, `config_flags.DEFINE_config_file(...)`)
# or argparse (`parser.add_argument("--out", ...)`).
DEFINED = re.compile(r"DEFINE_\w+\(\s*\"(\w+)\"|add_argument\(\s*\"--(\w+)\"")
# absl's boolean flags also take the form `--noFLAG`.
BOOLEAN = re.compile(r"DEFINE_bool(?:ean)?\(\s*\"(\w+)\"")
# A job that runs another job's main with its flags (`from experiments import pretrain`).
JOB_IMPORT = re.compile(r"^\s*from (experiments|benchmarks) import ([\w, ]+?)\s*(?:#.*)?$", re.MULTILINE)


def documents() -> list[str]:
    """README.md, BENCHMARKS.md and the Markdown pages of docs/, sorted (the dated benchmark reports keep the
    commands of their day)."""
    pages = sorted(os.path.join(DOCS, n) for n in os.listdir(DOCS) if n.endswith(".md"))
    return [README, BENCHMARKS, *pages]


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def documented_commands() -> list[tuple[str, str]]:
    """(document relative to the repository, command) for every command of `documents()`."""
    return [(os.path.relpath(path, ROOT), c) for path in documents() for c in commands(read(path))]


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
    flags = {a or b for a, b in DEFINED.findall(source)} | {f"no{n}" for n in BOOLEAN.findall(source)}
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


def test_the_readme_and_the_usage_page_have_commands():
    assert len(commands(read(README))) >= 3
    assert len(commands(read(USAGE))) >= 20


@pytest.mark.parametrize("document,command", documented_commands())
def test_every_documented_command_names_an_existing_module_config_and_flags(document, command):
    module, arguments = COMMAND.match(command).groups()
    if module in EXTERNAL_MODULES:
        return
    path = module_file(module)
    assert path, f"{document}: `python -m {module}` is not a module of the repository"
    for config in set(CONFIG_PATH.findall(arguments)) - USER_CONFIGS:
        assert os.path.isfile(os.path.join(ROOT, config)), f"{document}: {config} does not exist ({command})"
    if module.startswith(("experiments.", "benchmarks.")) and module not in PASSTHROUGH_MODULES:
        unknown = set(FLAG.findall(arguments)) - defined_flags(path)
        assert not unknown, f"{document}: `python -m {module}` has no flag {sorted(unknown)}"


def own_data_commands() -> list[str]:
    """The commands of the first bash block of the "Your own data" section of docs/usage.md."""
    section = read(USAGE).split("\n## Your own data\n", 1)[1]
    language, body = next(block for block in FENCE.findall(section) if block[0] == "bash")
    return commands(f"```{language}\n{body}```\n")


@pytest.mark.slow
def test_the_own_data_path_runs_as_the_usage_page_shows_it(tmp_path, compilation_cache):
    """JSONL of real text (German prose of the demo corpus standing in for yours) -> `tokenize_data
    --tokenizer=demo` -> 20 steps of the tiny model -> its perplexity on held-out documents of yours, each
    command as docs/usage.md prints it (its /tmp/ paths moved into this test's directory, run from there): the
    shards hold the file's documents, the run trains on them with its schedule fitted to the 20 steps, the loss
    falls, and the evaluation scores the held-out file and says so."""
    from apertus_jax.data.demo_corpus import load_german_prose

    prose = [d["text"] for d in load_german_prose()]
    documents, heldout = prose[:1000], prose[1000:1020]
    for name, texts in (("my_text.jsonl", documents), ("my_heldout.jsonl", heldout)):
        with open(tmp_path / name, "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"text": text}, ensure_ascii=False) + "\n" for text in texts)
    steps = own_data_commands()
    assert [shlex.split(c)[2] for c in steps] == [
        "experiments.tokenize_data",
        "experiments.pretrain",
        "experiments.evaluate",
    ]
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=ROOT, JAX_COMPILATION_CACHE_DIR=compilation_cache)
    logs, results = [], []
    for command in steps:
        argv = shlex.split(command.replace("/tmp/", f"{tmp_path}/"))
        result = subprocess.run(
            [sys.executable, *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert result.returncode == 0, result.stderr[-3000:]
        logs.append(result.stderr)
        results.append(result.stdout)
    with open(tmp_path / "my_shards" / "manifest.json") as f:
        assert json.load(f)["documents"] == len(documents)
    assert results[0].startswith(f"wrote {tmp_path}/my_shards: {len(documents):,} documents, ")
    assert results[1] == f"run done: {tmp_path}/my_run\n"
    with open(tmp_path / "my_run" / "metrics.jsonl") as f:
        records = [json.loads(line) for line in f]
    assert [r["step"] for r in records] == list(range(1, 21))
    assert records[-1]["loss"] < records[0]["loss"] - 1.0, [r["loss"] for r in records]
    with open(tmp_path / "my_run" / "provenance.json") as f:
        assert json.load(f)["tokens_consumed"] == {"text": records[-1]["tokens"]}
    assert "train.steps=20 overridden without the schedule: the schedule follows it" in logs[1]
    with open(tmp_path / "my_run" / "eval" / "perplexity.json") as f:
        scored = json.load(f)
    assert scored["data"] == "--heldout=my_heldout.jsonl (20 documents)" and scored["num_documents"] == 20
    assert scored["step"] == 20 and "unseen_languages" not in scored
    assert "perplexity: scoring 20 documents of --heldout=my_heldout.jsonl" in logs[2]
    assert "run: model tiny" in logs[1] and "optimizer ademamix" in logs[1] and "tokens planned" in logs[1]


def test_every_documented_post_training_command_names_the_workdir_it_starts_from():
    """One convention for the docs: SFT and QRPO/DPO pass `--config.checkpoint.init_from=`. Before, the commands
    of docs/posttrain.md relied on their configs' default (`workdir/tiny_demo`), which a demo run written
    elsewhere (the README's /tmp/apertus_demo) does not match: the SFT refused to start."""
    posttrain = [  # the runs, not the mentions of a command's name
        (d, c)
        for d, c in documented_commands()
        if c.split()[2] in ("experiments.sft", "experiments.qrpo") and "--workdir=" in c
    ]
    assert {d for d, _ in posttrain} == {"docs/posttrain.md", "docs/usage.md"}
    assert [(d, c) for d, c in posttrain if "--config.checkpoint.init_from=" not in c] == []


def test_the_readme_s_first_run_points_to_its_evaluation():
    try_it = read(README).split("## Try it", 1)[1].split("\n## ", 1)[0]
    assert "python -m experiments.evaluate --workdir=/tmp/apertus_demo" in try_it
    assert "(docs/usage.md#evaluation)" in try_it
