"""The `posttrain` section of a run: the post-training data, which loss the train step optimizes, the reference.

data       post-training JSONL files (docs/posttrain.md): conversations for SFT (objective "lm"), preference
           records for "qrpo" / "dpo"; () = pretraining on `data.pipeline`
objective  "lm" (pretraining and SFT: next-token cross-entropy over `loss_mask`), "qrpo" or "dpo"
beta       QRPO's b / DPO's beta: the KL coefficient (Apertus QRPO: b = 5, docs/posttrain.md)
length_normalized   divide beta by the completion length |y| in every loss term (Apertus section 4.3)
qrpo_variant        "exact" (the paper's loss with the exact partition function) or "apertus_trainer" (as the
           Apertus post-training trainer computes it: b' capped at 0.1, the simplified log Z; docs/posttrain.md)
reference  "cached": reference log-probs computed once from the frozen reference and read from
           `reference_cache` (experiments/qrpo.py writes WORKDIR/reference_logprobs.json); "on_the_fly":
           the reference model scores every batch as it is produced (held in memory)
reference_cache     the file of the cached reference log-probs ("" = WORKDIR/reference_logprobs.json)
reference_workdir   the reference model's workdir ("" = checkpoint.init_from)
"""

import dataclasses

from apertus_jax.checks import check_choice, check_number

OBJECTIVES = ("lm", "qrpo", "dpo")
QRPO_VARIANTS = ("exact", "apertus_trainer")
REFERENCE_MODES = ("cached", "on_the_fly")


@dataclasses.dataclass(frozen=True)
class PosttrainConfig:
    """The `posttrain` section (fields in the module docstring).

    Raises:
      ValueError: in `__post_init__`, one line naming the field ("posttrain.<field>") and its valid values.
    """

    data: tuple[str, ...] = ()
    objective: str = "lm"
    beta: float = 5.0
    length_normalized: bool = True
    qrpo_variant: str = "exact"
    reference: str = "cached"
    reference_cache: str = ""
    reference_workdir: str = ""

    def __post_init__(self):
        check_choice("posttrain.objective", self.objective, OBJECTIVES)
        check_choice("posttrain.reference", self.reference, REFERENCE_MODES)
        check_choice("posttrain.qrpo_variant", self.qrpo_variant, QRPO_VARIANTS)
        check_number("posttrain.beta", self.beta, low=0, low_open=True)
        if isinstance(self.data, str) or not all(isinstance(p, str) and p for p in self.data):
            raise ValueError(f"posttrain.data={self.data!r} must be a list of JSONL paths")
        object.__setattr__(self, "data", tuple(self.data))
        if self.objective != "lm" and not self.data:
            raise ValueError(
                f"posttrain.objective={self.objective!r} needs preference records: set posttrain.data"
            )
        if self.qrpo_variant != "exact" and self.objective != "qrpo":
            raise ValueError(
                f"posttrain.qrpo_variant={self.qrpo_variant!r} applies to objective 'qrpo' only "
                f"(objective is {self.objective!r})"
            )
        if not isinstance(self.length_normalized, bool):
            raise ValueError(
                f"posttrain.length_normalized must be True or False, got {self.length_normalized!r}"
            )


def section() -> dict:
    """The `posttrain` section of a run config: the defaults of `PosttrainConfig`."""
    return {f.name: f.default for f in dataclasses.fields(PosttrainConfig)}
