"""The sample stream of Megatron's GPTDataset (and BlendedDataset) over Megatron indexed datasets.

Given the prefixes of a blend, the sequence length, the seed, the split string, the number of samples and the
add-extra-token setting, `gpt_samples` gives the token rows the Apertus Megatron fork's GPTDataset yields, in
its order: row i of `gpt_samples(...)` is the `text` that `dataset[i]` reads before it splits tokens from
labels. The rules (docs/data.md, "The GPTDataset sample stream"; primary sources: Megatron-LM's
megatron/core/datasets/gpt_dataset.py, blended_dataset.py, blended_megatron_dataset_builder.py,
blended_megatron_dataset_config.py and helpers.cpp):

- split: "969,30,1" normalized; part p takes the sequences [round(lo * S), round(hi * S)) between the
  cumulative sums of the parts before it and including it;
- epochs: the fewest whose tokens reach num_samples * seq_len + extra; a last epoch that would yield fewer
  than 80% of an epoch's samples is shuffled on its own ("separate last epoch");
- document index: the part's sequence ids repeated per epoch, shuffled with one `numpy.random.RandomState(seed)`
  (all epochs together, or the first ones and then the separate last one);
- sample index: sample s starts at token s * seq_len of the concatenated document index and holds seq_len +
  extra tokens (helpers.cpp build_sample_idx, ported to numpy by counting sample starts per document);
- shuffle index: a permutation of the samples by the same RandomState (the separate last epoch's samples
  permuted after the others);
- blends: weights normalized; prefix i builds ceil(ceil(N * w_i) * 1.005) samples, and the blend's
  sum(ceil(N * w_i)) rows take, one at a time, the prefix whose share lags its weight most
  (helpers.cpp build_blending_indices).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from apertus_jax.data.megatron.indexed import IndexedDataset, check_tokenizer, parse_blend
from apertus_jax.data.pipeline import rows_to_batch

PARTS = ("train", "valid", "test")
SEPARATE_LAST_EPOCH_BELOW = 0.80  # of an epoch's samples
BLEND_MARGIN_PERCENT = 0.5


def _normalize(weights: Sequence[float]) -> list[float]:
    """Weights divided by their float64 sum, as Python floats (Megatron's `normalize`)."""
    values = np.array(weights, dtype=np.float64)
    return (values / np.sum(values)).tolist()


def split_range(split: str, count: int, part: str = "train") -> tuple[int, int]:
    """The sequence range [begin, end) of `part` among `count` sequences for a Megatron split string.

    Args:
      split: ratios such as "969,30,1" or "99,1" (missing parts are 0).
      count: the sequences of the prefix.
      part: "train", "valid" or "test".

    Raises:
      ValueError: an unknown part, a split string without 1 to 3 ratios >= 0 summing to > 0, or a part of
        width 0.
    """
    if part not in PARTS:
        raise ValueError(f"part={part!r} must be one of {PARTS}")
    ratios = [float(r) for r in re.findall(r"[.0-9]+", split)]
    if not 1 <= len(ratios) <= 3 or sum(ratios) <= 0:
        raise ValueError(f"split={split!r} must hold 1 to 3 ratios >= 0 with a positive sum, e.g. '969,30,1'")
    vector = _normalize(ratios + [0.0] * (3 - len(ratios)))
    bookends = [0]
    for ratio in vector:
        bookends.append(bookends[-1] + ratio)
    low, high = bookends[PARTS.index(part)], bookends[PARTS.index(part) + 1]
    if high <= low:
        raise ValueError(f"split={split!r} gives the {part} part no sequences")
    return int(round(low * float(count))), int(round(high * float(count)))


def number_of_epochs(tokens_per_epoch: int, num_samples: int, seq_len: int, add_extra_token: bool) -> int:
    """The fewest epochs whose tokens reach `num_samples * seq_len + add_extra_token`."""
    needed = num_samples * seq_len + int(add_extra_token)
    return max(1, -(-needed // tokens_per_epoch))


def separate_last_epoch(
    tokens_per_epoch: int, num_epochs: int, num_samples: int, seq_len: int, add_extra_token: bool
) -> bool:
    """Whether the last epoch is shuffled on its own: it yields fewer than 80% of an epoch's samples."""
    if num_epochs == 1:
        return False
    extra = int(add_extra_token)
    before_last = ((num_epochs - 1) * tokens_per_epoch - extra) // seq_len
    per_epoch = (tokens_per_epoch - extra) // seq_len
    return num_samples - before_last < int(SEPARATE_LAST_EPOCH_BELOW * per_epoch)


def document_index(
    documents: np.ndarray, num_epochs: int, rng: np.random.RandomState, separate_last: bool
) -> np.ndarray:
    """int32 `[num_epochs * len(documents)]`: `documents` once per epoch, shuffled in place by `rng`
    (the last epoch on its own after the others when `separate_last`)."""
    if separate_last and num_epochs > 1:
        first = document_index(documents, num_epochs - 1, rng, False)
        return np.concatenate([first, document_index(documents, 1, rng, False)])
    index = np.tile(np.asarray(documents, np.int32), num_epochs)
    rng.shuffle(index)
    return index


def sample_index(
    sizes: np.ndarray,
    documents: np.ndarray,
    seq_len: int,
    num_epochs: int,
    tokens_per_epoch: int,
    add_extra_token: bool,
) -> np.ndarray:
    """helpers.cpp build_sample_idx (dropping the last partial sample) in numpy: `[S + 1, 2]` rows of
    (position in `documents`, token offset in that document) where sample s starts and s - 1 ends; linear
    in documents and samples (1.07 * 10^7 samples over 2.2 * 10^7 document-index entries: 8.3 s,
    benchmarks/reports/2026-12-02-megatron-read.md).

    S = (num_epochs * tokens_per_epoch - extra) // seq_len. Sample s starts at token p = s * seq_len of the
    documents laid end to end: in the first document whose end is >= p + extra (so with the extra token a
    sample never starts at a document's end; without it, a boundary at a document's end stays in that
    document at offset = its length, as the C++ loop leaves it). dtype int32, or int64 when a document
    position or a length exceeds the int32 range (as Megatron's wrapper picks).

    Args:
      sizes: int32 `[N]` tokens per sequence of the file.
      documents: int `[M]` the document index (sequence ids, M = num_epochs * documents per epoch).
      seq_len: tokens per sample (> 1) before the extra token.
      num_epochs, tokens_per_epoch: as the document index was built.
      add_extra_token: samples of seq_len + 1 tokens that overlap by one.
    """
    extra = int(add_extra_token)
    count = (num_epochs * tokens_per_epoch - extra) // seq_len
    lengths = np.asarray(sizes)[documents].astype(np.int64)
    ends = np.cumsum(lengths)
    # Samples 1..count whose start + extra falls in (end of document j - 1, end of document j] start in j: as
    # many as the multiples of seq_len in that interval shifted by extra. One pass, no search.
    last_sample = np.maximum((ends - extra) // seq_len, 0)
    position = np.repeat(np.arange(len(ends)), np.diff(last_sample, prepend=0))
    starts = np.arange(1, count + 1, dtype=np.int64) * seq_len
    big = max(len(documents), int(np.max(sizes))) > np.iinfo(np.int32).max
    index = np.zeros((count + 1, 2), np.int64 if big else np.int32)
    index[1:, 0] = position
    index[1:, 1] = starts - (ends[position] - lengths[position])
    return index


def shuffle_index(num_samples: int, total: int, rng: np.random.RandomState) -> np.ndarray:
    """A permutation of [0, total): [0, num_samples) shuffled, then [num_samples, total) shuffled after it.

    uint32, or int64 from 2^32 - 2 samples on (Megatron's dtype rule)."""
    dtype = np.int64 if total >= np.iinfo(np.uint32).max - 1 else np.uint32
    first = np.arange(num_samples, dtype=dtype)
    rng.shuffle(first)
    if num_samples == total:
        return first
    last = np.arange(num_samples, total, dtype=dtype)
    rng.shuffle(last)
    return np.concatenate([first, last])


def blending_index(weights: Sequence[float], size: int) -> tuple[np.ndarray, np.ndarray]:
    """helpers.cpp build_blending_indices: per blended sample, the dataset (int16 `[size]`) and its sample
    (int64 `[size]`). Sample s goes to the dataset with the largest `w_i * max(s, 1) - taken_i` (the first on
    ties); its sample is the count taken from it so far. Double-precision arithmetic, as in the C++: a plain
    loop (~1 s per 10^6 samples of a three-way blend), since each choice depends on all earlier ones."""
    weights = [float(w) for w in weights]
    taken = [0] * len(weights)
    dataset = np.empty(size, np.int16)
    sample = np.empty(size, np.int64)
    others = range(1, len(weights))
    for s in range(size):
        scale = float(s) if s > 1 else 1.0
        best, best_error = 0, weights[0] * scale - taken[0]
        for i in others:
            error = weights[i] * scale - taken[i]
            if error > best_error:
                best, best_error = i, error
        dataset[s], sample[s] = best, taken[best]
        taken[best] += 1
    return dataset, sample


class GPTSamples:
    """One prefix's part as the fork's GPTDataset samples it (module docstring).

    `samples[i]` is int64 `[seq_len + add_extra_token]`: the tokens of sample `shuffle_index[i]`.

    Args:
      dataset: the opened prefix.
      seq_len: tokens per sample before the extra token (> 1).
      seed: the RandomState seed (Megatron's `--seed`).
      split: the split string, e.g. "969,30,1".
      num_samples: samples requested (>= 1); the dataset holds at least that many.
      add_extra_token: Megatron's `add_extra_token_to_sequence` (default on).
      part: "train", "valid" or "test".

    Attributes:
      num_samples: the samples requested (a blend asks its prefixes for 0.5% more than their share).
      document_index, sample_index, shuffle_index: as `document_index`, `sample_index`, `shuffle_index`.
      num_epochs, separate_last_epoch: how the document index was built.

    Raises:
      ValueError: seq_len < 2, num_samples < 1, a bad split or an empty part.
    """

    def __init__(
        self,
        dataset: IndexedDataset,
        *,
        seq_len: int,
        seed: int,
        split: str,
        num_samples: int,
        add_extra_token: bool = True,
        part: str = "train",
    ):
        if seq_len < 2 or num_samples < 1:
            raise ValueError(f"seq_len={seq_len} must be >= 2 and num_samples={num_samples} >= 1")
        self.dataset, self.seq_len, self.extra = dataset, seq_len, int(add_extra_token)
        self.num_samples = num_samples
        begin, end = split_range(split, len(dataset), part)
        if end <= begin:
            raise ValueError(f"{dataset.prefix}: split={split!r} leaves the {part} part no sequences")
        sizes = dataset.sequence_lengths
        tokens_per_epoch = int(np.sum(sizes[begin:end], dtype=np.int64))
        if tokens_per_epoch <= self.extra:
            raise ValueError(f"{dataset.prefix}: the {part} part holds {tokens_per_epoch} tokens")
        self.num_epochs = number_of_epochs(tokens_per_epoch, num_samples, seq_len, add_extra_token)
        self.separate_last_epoch = separate_last_epoch(
            tokens_per_epoch, self.num_epochs, num_samples, seq_len, add_extra_token
        )
        rng = np.random.RandomState(seed)
        documents = np.arange(begin, end, dtype=np.int32)
        self.document_index = document_index(documents, self.num_epochs, rng, self.separate_last_epoch)
        self.sample_index = sample_index(
            sizes, self.document_index, seq_len, self.num_epochs, tokens_per_epoch, add_extra_token
        )
        total = self.sample_index.shape[0] - 1
        first = ((self.num_epochs - 1) * tokens_per_epoch - self.extra) // seq_len
        self.shuffle_index = shuffle_index(first if self.separate_last_epoch else total, total, rng)

    def __len__(self) -> int:
        return self.sample_index.shape[0] - 1

    def __getitem__(self, index: int) -> np.ndarray:
        sample = int(self.shuffle_index[index])
        (first, first_offset), (last, last_offset) = self.sample_index[sample], self.sample_index[sample + 1]
        pieces = []
        for position in range(int(first), int(last) + 1):
            offset = int(first_offset) if position == first else 0
            stop = int(last_offset) + self.extra if position == last else None
            document = int(self.document_index[position])
            pieces.append(self.dataset.get(document, offset, None if stop is None else stop - offset))
        return np.concatenate(pieces).astype(np.int64)


class BlendedSamples:
    """A weighted blend as the fork's BlendedDataset samples it: `samples[i]` is sample
    `dataset_sample_index[i]` of prefix `dataset_index[i]` (int64 `[seq_len + add_extra_token]`).

    Raises:
      ValueError: the blend index asks a prefix for more samples than it built (Megatron raises too).
    """

    def __init__(
        self, datasets: Sequence[IndexedDataset], weights: Sequence[float], num_samples: int, **options
    ):
        weights = _normalize(weights)
        targets = [int(math.ceil(num_samples * w)) for w in weights]
        buffered = [
            int(math.ceil(math.ceil(num_samples * w) * (1 + BLEND_MARGIN_PERCENT / 100))) for w in weights
        ]
        self.parts = [GPTSamples(d, num_samples=n, **options) for d, n in zip(datasets, buffered)]
        self.dataset_index, self.dataset_sample_index = blending_index(_normalize(weights), sum(targets))
        drawn = np.bincount(self.dataset_index, minlength=len(self.parts))
        for part, count in zip(self.parts, drawn):
            if count > len(part):
                raise ValueError(f"{part.dataset.prefix}: the blend draws {count} samples of its {len(part)}")

    def __len__(self) -> int:
        return len(self.dataset_index)

    def __getitem__(self, index: int) -> np.ndarray:
        return self.parts[self.dataset_index[index]][int(self.dataset_sample_index[index])]


def gpt_samples(
    blend: str | Sequence[str],
    *,
    seq_len: int,
    seed: int,
    split: str,
    num_samples: int,
    add_extra_token: bool = True,
    part: str = "train",
) -> GPTSamples | BlendedSamples:
    """The rows Megatron's GPT data path yields for `--data-path BLEND --split SPLIT --seed SEED`.

    Args:
      blend: a prefix, or a Megatron blend ("0.3 /data/a 0.7 /data/b" or its words as a list).
      seq_len, seed, split, num_samples, add_extra_token, part: as `GPTSamples`.

    Returns:
      `GPTSamples` for one prefix without a weight (Megatron builds no blend then), else `BlendedSamples`.

    Raises:
      ValueError: an unweighted blend of several prefixes (name the weights), or as `GPTSamples`.
      FileNotFoundError / ValueError: a prefix that does not open (`IndexedDataset`).
    """
    prefixes, weights = parse_blend(blend)
    options = dict(seq_len=seq_len, seed=seed, split=split, add_extra_token=add_extra_token, part=part)
    datasets = [IndexedDataset(p) for p in prefixes]
    if weights is None:
        if len(prefixes) > 1:
            raise ValueError(
                f"blend {list(prefixes)} of several prefixes needs weights: 'w1 prefix1 w2 prefix2'"
            )
        return GPTSamples(datasets[0], num_samples=num_samples, **options)
    return BlendedSamples(datasets, weights, num_samples, **options)


def fork_labels(text: np.ndarray, add_extra_token: bool, pad_id: int = -1) -> np.ndarray:
    """The labels the fork's GPTDataset hands to apply_goldfish for one row `text` (int64 `[T]`).

    With the extra token: text[1:]. Without: text shifted left by one with `pad_id` last. Then every label
    equal to `pad_id` (the tokenizer's pad, or -1 without one) becomes 0, as the fork does before Goldfish.
    """
    text = np.asarray(text, np.int64)
    labels = text[1:].copy() if add_extra_token else np.append(text[1:], pad_id)
    labels[labels == pad_id] = 0
    return labels


def summary(stream: GPTSamples | BlendedSamples) -> list[dict]:
    """Per prefix of `stream`: prefix, dtype, sequences, tokens, requested (samples asked of it), epochs,
    separate_last_epoch and samples built (what Megatron logs when it builds the indices)."""
    parts = stream.parts if isinstance(stream, BlendedSamples) else [stream]
    return [
        {
            "prefix": part.dataset.prefix,
            "dtype": part.dataset.dtype.name,
            "sequences": len(part.dataset),
            "tokens": int(np.sum(part.dataset.sequence_lengths, dtype=np.int64)),
            "requested": part.num_samples,
            "epochs": part.num_epochs,
            "separate_last_epoch": part.separate_last_epoch,
            "samples": len(part),
        }
        for part in parts
    ]


def first_rows(stream: GPTSamples | BlendedSamples, count: int) -> np.ndarray:
    """int64 `[count, seq_len + add_extra_token]`: rows 0 .. count - 1 of `stream`.

    Raises:
      ValueError: `count` outside [1, len(stream)].
    """
    if not 1 <= count <= len(stream):
        raise ValueError(f"rows={count} must be in [1, {len(stream)}] (the samples of this stream)")
    return np.stack([stream[i] for i in range(count)])


class GPTBatches:
    """The trainer's batches of a GPT sample stream, for one data shard (the batch-source protocol of
    docs/architecture.md: `__next__`, `get_state`/`set_state`, `consumed`).

    Global batch b holds the stream's next B_b rows (B_b = the plan's tokens of step b / seq_len), as
    Megatron's pretraining sampler hands consecutive rows to each global batch; shard k of S takes their k-th
    consecutive B_b / S. A row of seq_len + 1 tokens gives inputs and targets directly; without the extra token
    the pad id is appended (the fork's pad label, never a target). Masks and Goldfish are the pipeline's
    (`rows_to_batch`; Goldfish "apertus" on these targets is the fork's apply_goldfish).

    Args:
      stream: `gpt_samples(...)` of the run's seq_len.
      tokenizer: the run's tokenizer (ids checked against its vocabulary; eod and pad ids for the masks).
      goldfish: the run's Goldfish settings.
      seq_len: the run's `data.seq_len` (must be the stream's).
      batch_size: an int (global rows per step) or a plan with `batch_tokens_at_step(step)`.
      shard, num_shards: this shard and the shard count.
      name: the key of `consumed()["tokens"]`.

    Raises:
      ValueError: another seq_len than the stream's, a prefix the tokenizer cannot be the one of
        (`megatron.check_tokenizer`); from `__next__`, a global batch not divisible by num_shards, a stream that
        runs out (request more samples), or an id outside the vocabulary.
    """

    def __init__(
        self,
        stream: GPTSamples | BlendedSamples,
        tokenizer,
        goldfish,
        *,
        seq_len: int,
        batch_size,
        shard: int,
        num_shards: int,
        name: str = "megatron",
    ):
        parts = stream.parts if isinstance(stream, BlendedSamples) else [stream]
        for part in parts:
            check_tokenizer(part.dataset, tokenizer)
        if parts[0].seq_len != seq_len:
            raise ValueError(
                f"the sample stream has seq_len {parts[0].seq_len}, the run data.seq_len {seq_len}"
            )
        self.stream, self.tokenizer, self.goldfish = stream, tokenizer, goldfish
        self.seq_len, self.extra, self.name = seq_len, parts[0].extra, name
        self.batch_size, self.shard, self.num_shards = batch_size, shard, num_shards
        self.step, self.next_row, self.rows_taken = 0, 0, 0

    def _global_rows(self) -> int:
        if isinstance(self.batch_size, int):
            return self.batch_size
        tokens = int(self.batch_size.batch_tokens_at_step(self.step))
        if tokens % self.seq_len:
            raise ValueError(
                f"batch of {tokens} tokens at step {self.step} is not a multiple of seq_len {self.seq_len}"
            )
        return tokens // self.seq_len

    def __iter__(self) -> GPTBatches:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        rows = self._global_rows()
        if rows % self.num_shards:
            raise ValueError(
                f"global batch of {rows} rows at step {self.step} is not divisible by {self.num_shards} shards"
            )
        if self.next_row + rows > len(self.stream):
            raise ValueError(
                f"the sample stream holds {len(self.stream)} rows and step {self.step} needs rows up to "
                f"{self.next_row + rows}: request more samples"
            )
        share = rows // self.num_shards
        first = self.next_row + self.shard * share
        batch = np.stack([self.stream[i] for i in range(first, first + share)])
        if int(batch.max()) >= self.tokenizer.vocab_size or int(batch.min()) < 0:
            raise ValueError(
                f"rows {first}..{first + share - 1} of the sample stream hold an id outside [0, "
                f"{self.tokenizer.vocab_size}): the data is from another tokenizer"
            )
        if not self.extra:
            batch = np.concatenate([batch, np.full((share, 1), self.tokenizer.pad_id)], axis=1)
        self.step, self.next_row, self.rows_taken = (
            self.step + 1,
            self.next_row + rows,
            self.rows_taken + share,
        )
        return rows_to_batch(batch.astype(np.int32), self.tokenizer, self.goldfish)

    def get_state(self) -> dict:
        """`{"step", "next_row", "rows_taken"}`: JSON-serializable."""
        return {"step": self.step, "next_row": self.next_row, "rows_taken": self.rows_taken}

    def set_state(self, state: dict) -> None:
        """Continues right after `get_state()` of the same stream and shard layout."""
        self.step, self.next_row, self.rows_taken = (
            int(state[k]) for k in ("step", "next_row", "rows_taken")
        )

    def consumed(self) -> dict:
        """`{"tokens": {name: target tokens handed out}}` (the appended pad labels are no targets)."""
        return {"tokens": {self.name: self.rows_taken * (self.seq_len - 1 + self.extra)}}
