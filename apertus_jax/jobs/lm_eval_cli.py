"""lm-evaluation-harness's command line with our model `apertus_jax` registered (docs/lm_eval.md).

    python -m apertus_jax.jobs.lm_eval_cli run --model apertus_jax --model_args workdir=DIR \\
        --tasks german_exams_qa --include_path TASK_DIR

Every argument is lm-eval's own (`lm_eval --help`); this entry point only imports
`apertus_jax.jobs.lm_eval` first, because lm-eval 0.4.13 finds `--model` names only in its
in-process registry (no plugin entry points for models). Also installed as the `apertus-lm-eval` script.
"""

import sys


def main() -> None:
    """Register `apertus_jax`, then run lm-eval's CLI on `sys.argv`."""
    try:
        from lm_eval.__main__ import cli_evaluate

        import apertus_jax.jobs.lm_eval  # noqa: F401  (registers the model)
    except ImportError as err:
        sys.exit(f"apertus-lm-eval: {err}; install the eval extra: pip install -e '.[eval]'")
    cli_evaluate()


if __name__ == "__main__":
    main()
