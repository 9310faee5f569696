"""The `eval` section of a run config: evaluation during training (`apertus_jax.eval.in_loop`)."""

import dataclasses

from apertus_jax.checks import check_number

EXAMS_QA_SUFFIX = "_exams_qa"
# In-loop eval sets of languages never trained on are named `unseen_languages/<component>`
# (`apertus_jax.eval.in_loop`); aggregate held-out losses leave them out.
UNSEEN_LANGUAGES = "unseen_languages"


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """The `eval` section.

    Attributes:
      every_steps: evaluate after every N-th step and after the last one; 0 disables evaluation.
      heldout_tokens: at most this many tokens of held-out documents per component (whole documents, in
        file order; at least one document).
      heldout_paths: ("name=path", ...): held-out files of non-demo components (same kind and fields), or
        of extra held-out sets under names that are no component (kind by the file's extension).
      tasks: multiple-choice tasks as in `experiments.evaluate` ("<language>_exams_qa").
      task_questions: the first N questions of each task (0 = all).
      batch_rows: rows per forward pass; 0 = the rows of the first batch-size phase.
    """

    every_steps: int = 0
    heldout_tokens: int = 2048
    heldout_paths: tuple = ()
    tasks: tuple = ("german_exams_qa",)
    task_questions: int = 20
    batch_rows: int = 0

    def __post_init__(self):
        check_number("eval.every_steps", self.every_steps, low=0, integer=True)
        check_number("eval.heldout_tokens", self.heldout_tokens, low=1, integer=True)
        check_number("eval.task_questions", self.task_questions, low=0, integer=True)
        check_number("eval.batch_rows", self.batch_rows, low=0, integer=True)
        object.__setattr__(self, "heldout_paths", tuple(self.heldout_paths))
        object.__setattr__(self, "tasks", tuple(self.tasks))
        for entry in self.heldout_paths:
            if not isinstance(entry, str) or "=" not in entry:
                raise ValueError(f"eval.heldout_paths entry {entry!r} must be 'component=path'")
        for task in self.tasks:
            if not isinstance(task, str) or not task.endswith(EXAMS_QA_SUFFIX):
                raise ValueError(f"eval.tasks entry {task!r} must be '<language>_exams_qa'")


def section() -> dict:
    return {f.name: f.default for f in dataclasses.fields(EvalConfig)}
