"""Export a training run as a HF checkpoint with its tokenizer and data statement
(`apertus_jax.trained.export.export_hf`, docs/export.md).

    python -m experiments.export_hf --workdir=/tmp/apertus_demo --out=/tmp/apertus_demo_hf

Writes `config.json` + `model.safetensors` (loadable with transformers' `ApertusForCausalLM`), `tokenizer.json`,
`tokenizer_config.json` (special tokens; the chat template of a post-trained run) and `generation_config.json`
for `AutoTokenizer` and `pipeline("text-generation")`, the run's provenance record as `training_data.json`
(sources, licences, tokens consumed per component, preparation statistics) and a model card `README.md`. The
chat template comes with a post-trained run (`experiments.sft`, `experiments.qrpo`), not with a pretraining run.
The export appears whole at the end: a non-empty `--out` is refused unless `--overwrite` (which replaces an
earlier export, and nothing else), and a failed export leaves nothing. A bad workdir or `--out` ends with one
line on stderr and exit status 2, before the model is read.
"""

from absl import flags

from apertus_jax.train.checkpoint import check_workdir_usable
from apertus_jax.trained.export import export_hf
from experiments import cli

_WORKDIR = flags.DEFINE_string("workdir", None, "A training workdir (experiments.pretrain output).")
_OUT = flags.DEFINE_string("out", None, "The HF checkpoint directory to write (new or empty).")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace a non-empty --out that holds an earlier export.")


def main(argv) -> None:
    del argv
    cli.required(workdir=_WORKDIR.value, out=_OUT.value)
    check_workdir_usable(_OUT.value, "--out")
    record = export_hf(_WORKDIR.value, _OUT.value, overwrite=_OVERWRITE.value)
    consumed = ", ".join(f"{name} {n:,}" for name, n in record["tokens_consumed"].items()) or "none recorded"
    print(f"wrote {_OUT.value} (step {record['step']:,}; tokens consumed: {consumed})")


if __name__ == "__main__":
    cli.execute(main)
