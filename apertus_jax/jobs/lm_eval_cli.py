"""lm-evaluation-harness's command line with our model `apertus_jax` registered (docs/lm_eval.md).

    python -m apertus_jax.jobs.lm_eval_cli run --model apertus_jax --model_args workdir=DIR \\
        --tasks german_exams_qa --include_path TASK_DIR

Every argument is lm-eval's own (`lm_eval --help`); this entry point only imports
`apertus_jax.jobs.lm_eval` first, because lm-eval 0.4.13 finds `--model` names only in its
in-process registry (no plugin entry points for models). Also installed as the `apertus-lm-eval` script.
Bad input (a `--model_args workdir=` that does not exist or holds no run, an unknown `--model_args` key, a
missing file) is one line `error: ...` on stderr and exit status 2, as in every `experiments` command.
"""

import sys
from typing import NoReturn

from apertus_jax import extras

USAGE_ERROR = 2


def _usage_error(error: Exception) -> NoReturn:
    print("error: " + " ".join(str(error).split()), file=sys.stderr)
    sys.exit(USAGE_ERROR)


def main() -> None:
    """Register `apertus_jax`, then run lm-eval's CLI on `sys.argv`; without the `eval` extra, or on bad input
    (a ValueError or OSError), one line on stderr and exit status 2."""
    try:
        extras.require("eval", "apertus-lm-eval")
    except ValueError as error:
        _usage_error(error)
    from lm_eval.__main__ import cli_evaluate

    import apertus_jax.jobs.lm_eval  # noqa: F401  (registers the model)

    try:
        cli_evaluate()
    except (ValueError, OSError) as error:
        _usage_error(error)


if __name__ == "__main__":
    main()
