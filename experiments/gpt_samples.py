"""The rows Megatron's GPTDataset yields for a blend, here, without Megatron (`apertus_jax.data.megatron.gpt_samples`).

    python -m experiments.gpt_samples --data_path="0.3 /data/web 0.7 /data/code" --seq_len=4096 \\
        --seed=1234 --split=969,30,1 --num_samples=1000000 [--no_add_extra_token] [--rows=8 --out=rows.npy]

Prints per prefix its dtype, sequences, tokens, epochs, whether the last epoch is shuffled on its own and the
samples built, then writes the first `--rows` rows (int64 `[rows, seq_len + extra]`) to `--out` as .npy, e.g.
to compare with the fork's data loader or to inspect a blend before a run. Every prefix is opened and checked
first: a broken or missing file, or an --out that cannot be written, ends with one line on stderr and exit
status 2, and nothing is written or printed.
"""

import numpy as np
from absl import flags

from apertus_jax import files
from apertus_jax.data.megatron import gpt_samples
from experiments import cli

_DATA_PATH = flags.DEFINE_string(
    "data_path", None, "A prefix or a blend 'w1 prefix1 w2 prefix2'.", required=True
)
_SEQ_LEN = flags.DEFINE_integer("seq_len", 4096, "Tokens per sample (Megatron's --seq-length).")
_SEED = flags.DEFINE_integer("seed", 1234, "Megatron's --seed.")
_SPLIT = flags.DEFINE_string("split", "969,30,1", "Megatron's --split.")
_NUM_SAMPLES = flags.DEFINE_integer(
    "num_samples", None, "Samples requested (train iters * global batch).", required=True
)
_ADD_EXTRA_TOKEN = flags.DEFINE_bool(
    "add_extra_token", True, "Samples of seq_len + 1 tokens (Megatron's default)."
)
_PART = flags.DEFINE_enum("part", "train", gpt_samples.PARTS, "The split part.")
_ROWS = flags.DEFINE_integer("rows", 8, "Rows written to --out.")
_OUT = flags.DEFINE_string("out", None, "A .npy file for the first --rows rows (none: print only).")


def main(argv) -> None:
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments {argv[1:]}")
    if _OUT.value:
        cli.check_output_file(_OUT.value, "--out")  # before the summary is printed
    stream = gpt_samples.gpt_samples(
        _DATA_PATH.value,
        seq_len=_SEQ_LEN.value,
        seed=_SEED.value,
        split=_SPLIT.value,
        num_samples=_NUM_SAMPLES.value,
        add_extra_token=_ADD_EXTRA_TOKEN.value,
        part=_PART.value,
    )
    for part in gpt_samples.summary(stream):
        print(" ".join(f"{key}={value}" for key, value in part.items()))
    print(f"rows={len(stream)}")
    if _OUT.value:
        rows = gpt_samples.first_rows(stream, _ROWS.value)
        with files.atomic_path(_OUT.value) as tmp, open(tmp, "wb") as f:
            np.save(f, rows, allow_pickle=False)
        print(f"wrote {_OUT.value}: {rows.shape[0]} rows of {rows.shape[1]} tokens")


if __name__ == "__main__":
    cli.execute(main)
