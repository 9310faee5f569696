"""Pretrain on the exact rows of the Megatron fork's GPTDataset for a blend (`apertus_jax.jobs.gpt_samples`).

    python -m experiments.pretrain_gpt_samples --config=configs/runs/tiny_demo.py --workdir=/runs/gpt \\
        --data_path="0.3 /data/megatron/web 0.7 /data/megatron/code" --split=969,30,1 [--num_samples=N]

The config gives the model, schedule, batch plan, Goldfish settings and seed (the fork's `--seed`); its
`data.pipeline` is not read. Re-running the same command on the same workdir resumes; SIGTERM saves a
checkpoint and exits 0; a bad prefix, split or config ends with one line on stderr and exit status 2 before
anything is written.
"""

from absl import flags

from apertus_jax.jobs.gpt_samples import pretrain_on_gpt_samples
from apertus_jax.train import distributed
from apertus_jax.train.checkpoint import check_workdir_usable
from experiments import cli

_CONFIG = cli.define_run_config("configs/runs/tiny_demo.py")
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory: checkpoints, metrics, logs.", required=True)
_DATA_PATH = flags.DEFINE_string(
    "data_path", None, "A prefix or a blend 'w1 prefix1 w2 prefix2'.", required=True
)
_SPLIT = flags.DEFINE_string("split", "969,30,1", "Megatron's --split (the train part is read).")
_NUM_SAMPLES = flags.DEFINE_integer("num_samples", 0, "Samples of the stream (0: the rows the run consumes).")
_ADD_EXTRA_TOKEN = flags.DEFINE_bool(
    "add_extra_token", True, "Samples of seq_len + 1 tokens (Megatron's default)."
)


def main(argv) -> None:
    del argv
    config = cli.parsed_config(_CONFIG)
    check_workdir_usable(_WORKDIR.value)
    distributed.initialize_from_env()
    status = pretrain_on_gpt_samples(
        config,
        _WORKDIR.value,
        _DATA_PATH.value,
        split=_SPLIT.value,
        num_samples=_NUM_SAMPLES.value or None,
        add_extra_token=_ADD_EXTRA_TOKEN.value,
    )
    cli.print_run_status(status, _WORKDIR.value)


if __name__ == "__main__":
    cli.execute(main, compilation_cache=True)
