"""Every command of experiments/ keeps its results on stdout and its progress and log on stderr
(docs/outputs.md), read from the commands' code: no `print` to another stream, no `print` as a progress
callback (progress goes to the log), and no `main` whose last word is a log line (its outcome is printed)."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).parents[2]
COMMANDS = sorted(
    path.name for path in (ROOT / "experiments").glob("*.py") if path.name not in ("__init__.py", "cli.py")
)


def _is_print(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "print"


def _is_log(node: ast.AST) -> bool:
    """A call of absl's or the standard library's `logging.<level>(...)`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "logging"
    )


def stream_problems(source: str) -> list[str]:
    """What in a command's source sends a result to stderr or progress to stdout, one line each."""
    tree = ast.parse(source)
    problems = []
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and _is_print(node.func)
            and any(k.arg == "file" for k in node.keywords)
        ):
            problems.append(f"line {node.lineno}: print(..., file=...): a command's results go to stdout")
        if isinstance(node, ast.Lambda) and any(
            isinstance(n, ast.Call) and _is_print(n.func) for n in ast.walk(node.body)
        ):
            problems.append(
                f"line {node.lineno}: a lambda that prints: progress goes to the log (logging.info)"
            )
        elif _is_print(node) and id(node) not in called:
            problems.append(
                f"line {node.lineno}: print as a callback: progress goes to the log (logging.info)"
            )
    main = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"), None)
    if main is not None and isinstance(main.body[-1], ast.Expr) and _is_log(main.body[-1].value):
        problems.append(f"line {main.body[-1].lineno}: main ends with a log line: print its outcome (stdout)")
    return problems


def test_each_rule_finds_its_case():
    source = (
        "import sys\nfrom absl import logging\n\n"
        "def main(argv):\n"
        "    print('wrote x', file=sys.stderr)\n"
        "    run(log=lambda line: print(line, flush=True))\n"
        "    run(log=print)\n"
        "    print('a result')\n"
        "    logging.info('run %s: %s', 'done', 'x')\n"
    )
    assert stream_problems(source) == [
        "line 5: print(..., file=...): a command's results go to stdout",
        "line 6: a lambda that prints: progress goes to the log (logging.info)",
        "line 7: print as a callback: progress goes to the log (logging.info)",
        "line 9: main ends with a log line: print its outcome (stdout)",
    ]
    assert stream_problems("def main(argv):\n    run(log=logging.info)\n    print('wrote x')\n") == []


@pytest.mark.parametrize("name", COMMANDS)
def test_a_command_prints_its_results_and_logs_its_progress(name):
    assert stream_problems((ROOT / "experiments" / name).read_text()) == []
