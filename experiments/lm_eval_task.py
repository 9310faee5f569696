"""Write a local lm-evaluation-harness task for `<language>-exams-qa` (`apertus_jax.eval.lm_eval_tasks`).

    python -m experiments.lm_eval_task --output_dir=/tmp/lm_eval_tasks            # german-exams-qa
    python -m experiments.lm_eval_task --output_dir=DIR --samples=tests/eval/assets/german_exams_qa_first20.jsonl

(--samples: an exams-qa samples.jsonl, e.g. the repository's first 20 German questions above, from the
repository root) writes `DIR/<language>_exams_qa.jsonl` and `DIR/<language>_exams_qa.yaml`, for `--include_path DIR
--tasks <language>_exams_qa` (docs/lm_eval.md). A bad argument ends with one line on stderr and exit status 2;
nothing is written then.
"""

from absl import flags

from apertus_jax.eval.lm_eval_tasks import write_exams_qa_task
from apertus_jax.train.checkpoint import check_workdir_usable
from experiments import cli

_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Directory for <task>.yaml and <task>.jsonl.")
_LANGUAGE = flags.DEFINE_string("language", "german", "exams-qa language.")
_SAMPLES = flags.DEFINE_string(
    "samples",
    None,
    "A local exams-qa samples.jsonl instead of the evals wheel (the wheel's "
    "evals/registry/data/<language>-exams-qa/samples.jsonl; tests/eval/assets/german_exams_qa_first20.jsonl holds "
    "its first 20 German questions).",
)
_WHEEL = flags.DEFINE_string(
    "wheel", None, "A local evals==3.0.1.post1 wheel (default: fetched into the cache)."
)
_LIMIT = flags.DEFINE_integer("limit", 0, "First N questions only (0 = all).")


def main(argv) -> None:
    del argv
    cli.required(output_dir=_OUTPUT_DIR.value)
    check_workdir_usable(_OUTPUT_DIR.value, "--output_dir")
    path, count = write_exams_qa_task(
        _OUTPUT_DIR.value, _LANGUAGE.value, samples=_SAMPLES.value, wheel=_WHEEL.value, limit=_LIMIT.value
    )
    print(f"wrote {path} ({count} questions); run with --include_path {_OUTPUT_DIR.value}")


if __name__ == "__main__":
    cli.execute(main)
