"""Writes the tiny post-training sets from `apertus_jax/posttrain/assets/qa_source.json`.

    python -m experiments.build_posttrain_data

`chat_tiny.jsonl` (SFT) and `qrpo_tiny.jsonl` (QRPO/DPO) into `apertus_jax/posttrain/assets/`; their lines
are `apertus_jax.posttrain.tiny_sets`'s.
"""

from apertus_jax.posttrain.tiny_sets import ASSETS, write_tiny_sets
from experiments import cli


def main(argv) -> None:
    del argv
    write_tiny_sets()
    print(f"wrote chat_tiny.jsonl and qrpo_tiny.jsonl to {ASSETS}")


if __name__ == "__main__":
    cli.execute(main)
