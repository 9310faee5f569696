"""Pretraining on the exact rows of the Megatron fork's GPTDataset (`apertus_jax.data.megatron.gpt_samples`).

    status = pretrain_on_gpt_samples(parse(config_dict), workdir, "0.3 /data/web 0.7 /data/code",
                                     split="969,30,1")

The run's model, optimizer, batch plan, Goldfish settings and checkpoints are the config's; its data is the
blend's GPT sample stream (seq_len `data.seq_len`, seed `seed` like the fork's `--seed`, as many samples as the
run's `train.steps` consume unless `num_samples` says otherwise), in the fork's order and split into the run's
data shards as Megatron's sampler splits global batches over data-parallel ranks. The rows and their Goldfish
drops are the fork's (docs/data.md, "The GPTDataset sample stream"); positions, attention and the EoD loss
mask follow this trainer's document masking (docs/recipe.md section 2). Resume is exact: the source's state is
the next row.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np

from apertus_jax.config.schema import Config
from apertus_jax.data.megatron.gpt_samples import GPTBatches, gpt_samples, split_range
from apertus_jax.data.megatron.indexed import IndexedDataset, parse_blend
from apertus_jax.data.process_shards import sharded
from apertus_jax.jobs.pretrain import run_training
from apertus_jax.train.batches import BatchSource
from apertus_jax.train.run import Run


def run_rows(config: Config) -> int:
    """The global rows the run's `train.steps` steps consume under its batch plan."""
    steps = np.arange(config.train.steps)
    return int(np.sum(np.asarray(config.train.plan.batch_tokens_at_step(steps)) // config.data.seq_len))


def gpt_sample_source(
    blend: str, *, split: str, num_samples: int, add_extra_token: bool = True
) -> Callable[[Run], BatchSource]:
    """The batch-source plug-in (`jobs.pretrain.assemble`) of a blend's GPT sample stream (module docstring).

    Raises (when the run builds it):
      ValueError / FileNotFoundError: a broken prefix, a bad split, or as `GPTBatches`.
    """

    def source(run: Run) -> BatchSource:
        config = run.config
        stream = gpt_samples(
            blend,
            seq_len=config.data.seq_len,
            seed=config.seed,
            split=split,
            num_samples=num_samples,
            add_extra_token=add_extra_token,
        )

        def shard(index: int, count: int) -> GPTBatches:
            return GPTBatches(
                stream,
                run.tokenizer,
                config.data.pipeline.goldfish,
                seq_len=config.data.seq_len,
                batch_size=run.plan,
                shard=index,
                num_shards=count,
            )

        return sharded(shard, config.data, jax.process_index(), jax.process_count())

    return source


def pretrain_on_gpt_samples(
    config: Config,
    workdir: str,
    blend: str,
    *,
    split: str = "969,30,1",
    num_samples: int | None = None,
    add_extra_token: bool = True,
) -> str:
    """Trains (or resumes) `config` in `workdir` on the GPT sample stream of `blend`; "done" or "preempted".

    Args:
      blend: a prefix or a Megatron blend "w1 prefix1 w2 prefix2".
      split: Megatron's split string; the train part is read.
      num_samples: the samples the stream is built for (Megatron's train_iters * global batch); None: the rows
        this run consumes (`run_rows`). The order of the rows depends on it, as in the fork.
      add_extra_token: Megatron's `add_extra_token_to_sequence`.

    Raises:
      ValueError / FileNotFoundError: a broken prefix, a bad split, too few samples for the run, or as
        `jobs.pretrain.run_training`.
    """
    prefixes, weights = parse_blend(blend)
    for prefix in prefixes:  # a broken prefix or split: one line before the run logs anything
        split_range(split, len(IndexedDataset(prefix)))
    num_samples = num_samples or run_rows(config)
    data = {
        "megatron": {
            "kind": "megatron GPT samples",
            "prefixes": list(prefixes),
            "weights": weights and list(weights),
            "split": split,
            "seed": config.seed,
            "num_samples": num_samples,
            "add_extra_token": add_extra_token,
            "licence": None,
        }
    }
    source = gpt_sample_source(blend, split=split, num_samples=num_samples, add_extra_token=add_extra_token)
    return run_training(config, workdir, batch_source=source, data=data)
