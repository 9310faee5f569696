"""The tiny demo model on your own text: the shard sets `experiments.tokenize_data --tokenizer=demo` writes.

    python -m experiments.tokenize_data --input=my_text.jsonl --tokenizer=demo --out=/tmp/my_shards \\
        --source=my-text --licence=CC-BY-4.0
    python -m experiments.pretrain --config=configs/runs/tiny_own_data.py:/tmp/my_shards --workdir=/tmp/my_run

The argument names the shard sets (comma-separated directories), read as one component "text". The rest is
`tiny_demo`'s: the model, the 4,096-id demo BPE the shards were tokenized with, 300 steps of 16 x 128 tokens,
the schedule; no in-loop evaluation (its held-out sets and exam questions are the demo corpus's; a held-out
file of yours: `--config.eval.every_steps=100 --config.eval.heldout_paths='("heldout=PATH.jsonl",)'`). After
the run, `python -m experiments.evaluate --task=perplexity --heldout=PATH` scores your held-out file or shards
(without `--heldout`, the file of `eval.heldout_paths`; with neither, it refuses).
"""

from configs.runs import tiny_demo


def get_config(shards: str = ""):
    if not shards:
        raise ValueError(
            "this config needs your shard set: "
            "--config=configs/runs/tiny_own_data.py:/path/to/shards (experiments.tokenize_data --out)"
        )
    config = tiny_demo.get_config()
    with config.unlocked():
        config.data.pipeline.components = dict(text=dict(kind="arrayrecord", paths=shards.split(",")))
        config.eval.every_steps = 0
    return config
