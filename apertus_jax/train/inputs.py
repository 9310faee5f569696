"""The run's tokenizer and training-batch iterator, from the `data` section of the config.

The demo default (`data.tokenizer = "demo"`) is a SentencePiece BPE of `data.demo_tokenizer_vocab` ids
trained on the demo corpus's train split (a few seconds) and cached under $APERTUS_JAX_CACHE (default
~/.cache/apertus_jax), keyed by the corpus checksum and the vocabulary size. A small vocabulary keeps the
tiny CPU model's embedding and logits cheap (tekken's 131,072 ids would dominate it), so its loss falls
clearly within minutes.
"""

import hashlib
import os

import grain
import jax
import ml_collections
import numpy as np

from apertus_jax.cache import cache_dir  # re-exported: experiments import it from here
from apertus_jax.data import demo_corpus
from apertus_jax.data.pipeline import build_train_pipeline
from apertus_jax.optim import BatchSizePlan
from apertus_jax.tokenizers import load_tokenizer
from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.tokenizers.train import BPEConfig, train_sentencepiece


def demo_tokenizer_path(vocab_size: int, texts: list[str]) -> str:
    """Cache path of the demo BPE with `vocab_size` ids trained on `texts` (the demo train split).

    Keyed on the training texts themselves, not on the asset files: a change of the split rule with the same
    assets yields another tokenizer, so a cache written before the change is not reused.
    """
    corpus_key = hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()[:12]
    return os.path.join(cache_dir(), f"demo_bpe{vocab_size}_cov98_{corpus_key}.model")


def demo_tokenizer(vocab_size: int) -> Tokenizer:
    """The demo corpus's SentencePiece BPE with `vocab_size` ids, trained once and cached (atomic write)."""
    texts = [d["text"] for d in demo_corpus.load_demo_documents("train")]
    path = demo_tokenizer_path(vocab_size, texts)
    if not os.path.exists(path):
        # 0.98 coverage: rare characters of the 440 UDHR languages fall back to bytes instead of taking most of
        # a small vocabulary (at 0.9995, 3,371 characters need their own id; at 0.995, 1,843).
        train_sentencepiece(texts, path, BPEConfig(vocab_size=vocab_size, character_coverage=0.98))
    return load_tokenizer(f"sentencepiece:{path}")


def load_run_tokenizer(data: ml_collections.ConfigDict) -> Tokenizer:
    """`data.tokenizer`: "demo" or a `load_tokenizer` spec ("tekken", "sentencepiece:PATH", "hf:PATH").

    Raises:
      FileNotFoundError: the tokenizer file does not exist. ValueError: an unknown spec.
    """
    if data.tokenizer == "demo":
        return demo_tokenizer(data.demo_tokenizer_vocab)
    return load_tokenizer(data.tokenizer)


class ShardedIterator(grain.DatasetIterator):
    """This process's rows: the batches of its consecutive data shards, concatenated in shard order.

    With `data.num_shards = S` fixed, the global batch (shards 0..S-1 in row order) is the same whether
    1, 2, ... or S processes read it, so a run's data order does not depend on the number of hosts.
    """

    def __init__(self, shards: list):
        super().__init__()
        self.shards = shards
        self.tokenizer = getattr(shards[0], "tokenizer", None) if shards else None

    def __next__(self) -> dict:
        batches = [next(shard) for shard in self.shards]
        return {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}

    def get_state(self) -> dict:
        return {"shards": [shard.get_state() for shard in self.shards]}

    def tokens_consumed(self) -> dict[str, int]:
        """Target tokens per data component over this process's shards (see `TrainIterator.tokens_consumed`);
        {} for pipelines without per-component accounting (post-training chat and preference rows)."""
        if not hasattr(self.shards[0], "tokens_consumed"):
            return {}
        totals = dict.fromkeys(self.shards[0].component_names, 0)
        for shard in self.shards:
            for name, tokens in zip(shard.component_names, shard.tokens_consumed()):
                totals[name] += tokens
        return totals

    def set_state(self, state: dict) -> None:
        if len(state["shards"]) != len(self.shards):
            raise ValueError(
                f"data iterator state holds {len(state['shards'])} shards, this process reads "
                f"{len(self.shards)}; resume with the same data.num_shards and process count"
            )
        for shard, shard_state in zip(self.shards, state["shards"]):
            shard.set_state(shard_state)


def make_train_iterator(config: ml_collections.ConfigDict, tokenizer: Tokenizer, plan: BatchSizePlan):
    """This process's batch iterator: [B / process_count, T] rows per step, B following the batch-size plan;
    Grain-checkpointable (get_state / set_state).

    The data is split into `data.num_shards` shards (0: one per process), each an
    `apertus_jax.data.build_train_pipeline` reading a disjoint share of the documents; process p reads the
    shards [p * S / P, (p + 1) * S / P).

    Raises:
      ValueError / FileNotFoundError: bad pipeline config or a missing data path; num_shards not a multiple of
        the process count.
    """
    processes, process = jax.process_count(), jax.process_index()
    num_shards = config.data.num_shards or processes
    if num_shards % processes:
        raise ValueError(f"data.num_shards={num_shards} must be a multiple of the {processes} processes")
    per_process = num_shards // processes
    from apertus_jax.posttrain.pipelines import posttrain_builder  # chat / preference data (post-training)

    builder = posttrain_builder(config, tokenizer) or build_train_pipeline
    return ShardedIterator(
        [
            builder(
                config.data.pipeline.to_dict(),
                tokenizer,
                seq_len=config.data.seq_len,
                batch_size=plan,
                process_index=shard,
                process_count=num_shards,
                seed=config.seed,
            )
            for shard in range(process * per_process, (process + 1) * per_process)
        ]
    )
