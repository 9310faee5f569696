"""lm-evaluation-harness's command line with our model `apertus_jax` registered (docs/lm_eval.md).

    python -m experiments.lm_eval run --model apertus_jax --model_args workdir=DIR \\
        --tasks german_exams_qa --include_path TASK_DIR

Every argument is lm-eval's own (`lm_eval --help`); this command only imports `apertus_jax.trained.lm_eval`
first, because lm-eval 0.4.13 finds `--model` names only in its in-process registry (no plugin entry points
for models). Also installed as the `apertus-lm-eval` script. Its arguments are lm-eval's, not absl flags, so it
does not go through `cli.execute`; bad input (a `--model_args workdir=` that does not exist or holds no run, an
unknown `--model_args` key, a missing file, a `pretrained=` checkpoint whose safetensors file is not whole, no
`eval` extra) is still one line `error: ...` on stderr and exit status 2 (`cli.usage_error`).
"""

import argparse

from experiments import cli


def _argument_error(parser: argparse.ArgumentParser, message: str) -> None:
    """lm-eval's argparse errors (an unknown or missing argument) as our one line, not its usage and message."""
    cli.usage_error(f"{parser.prog}: {message}; see --help")


def main() -> None:
    """Register `apertus_jax`, then run lm-eval's CLI on `sys.argv`; without the `eval` extra, or on bad input
    (a bad argument, a ValueError or OSError), one line on stderr and exit status 2."""
    cli.require_extras("eval")
    argparse.ArgumentParser.error = _argument_error  # this process runs lm-eval's parser only
    from lm_eval.__main__ import cli_evaluate

    import apertus_jax.trained.lm_eval  # noqa: F401  (registers the model)

    try:
        cli_evaluate()
    except (ValueError, OSError) as error:
        cli.usage_error(error)


if __name__ == "__main__":
    main()
