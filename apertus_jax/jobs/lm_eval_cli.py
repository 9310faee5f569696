"""lm-evaluation-harness's command line with our model `apertus_jax` registered (docs/lm_eval.md).

    python -m apertus_jax.jobs.lm_eval_cli run --model apertus_jax --model_args workdir=DIR \\
        --tasks german_exams_qa --include_path TASK_DIR

Every argument is lm-eval's own (`lm_eval --help`); this entry point only imports
`apertus_jax.jobs.lm_eval` first, because lm-eval 0.4.13 finds `--model` names only in its
in-process registry (no plugin entry points for models). Also installed as the `apertus-lm-eval` script.
"""

import sys

from apertus_jax import extras


def main() -> None:
    """Register `apertus_jax`, then run lm-eval's CLI on `sys.argv`; without the `eval` extra, one line on
    stderr naming it and exit status 2."""
    try:
        extras.require("eval", "apertus-lm-eval")
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    from lm_eval.__main__ import cli_evaluate

    import apertus_jax.jobs.lm_eval  # noqa: F401  (registers the model)

    cli_evaluate()


if __name__ == "__main__":
    main()
