"""Megatron indexed datasets (`PREFIX.bin` + `PREFIX.idx`): read, write, and the "megatron" component kind.

The layout (docs/data.md, "Megatron indexed datasets"; primary source: Megatron-LM's
megatron/core/datasets/indexed_dataset.py), all integers little-endian:

    PREFIX.bin   the token ids of every sequence, back to back, in the dataset's dtype
    PREFIX.idx   9-byte magic b"MMIDIDX\\x00\\x00" | uint64 version (1) | uint8 dtype code |
                 uint64 S (sequences) | uint64 D (document-index entries) |
                 int32[S] sequence lengths (tokens) | int64[S] sequence pointers (bytes into .bin) |
                 int64[D] document indices (0, then the sequence count after each document)

Dtype codes: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 8 uint16 (6 float64 and 7 float32 exist in the
layout but hold no token ids and are refused). Megatron's GPT preprocessing writes one sequence per document,
so D = S + 1 and the document indices are 0, 1, ..., S; `write_indexed_dataset` does the same. The GPT
dataset (and the component kind here) reads the S sequences as its documents.

The component kind "megatron" reads prefixes written here or by Megatron's tools/preprocess_data.py as they
are: the tokens of each sequence are the document (whatever BoD/EoD ids the writer put in). `paths` is a
prefix, a list of prefixes, or a Megatron blend ("0.3 /data/web 0.7 /data/code", or the same as a list):
with weights, the component's epoch holds each prefix's documents in proportion to its weight (token shares,
as Megatron's blend); without, each prefix's documents once. A prefix written by `experiments.tokenize_data
--format=megatron` has its manifest beside it (PREFIX.json): loading then checks its tokenizer checksum, and
the provenance record carries its source and licence.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import json
import os
import struct
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np

from apertus_jax import files
from apertus_jax.checks import check_number
from apertus_jax.data.documents import Component
from apertus_jax.data.kinds import DocumentSpec, check_paths, paths_tuple, register_kind
from apertus_jax.data.run_tokenizer import check_tokenized_with

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPE_CODES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 8: np.uint16}
FLOAT_CODES = {6: "float64", 7: "float32"}
_CODE_OF = {np.dtype(dtype): code for code, dtype in DTYPE_CODES.items()}
_HEADER = len(MAGIC) + 8 + 1 + 8 + 8  # magic, version, dtype code, S, D


def index_path(prefix: str | os.PathLike) -> str:
    """`PREFIX.idx`."""
    return os.fspath(prefix) + ".idx"


def data_path(prefix: str | os.PathLike) -> str:
    """`PREFIX.bin`."""
    return os.fspath(prefix) + ".bin"


def token_dtype(dtype: Any) -> np.dtype:
    """`dtype` as one of the layout's integer dtypes.

    Raises:
      ValueError: a dtype without an integer code of the layout (uint32, uint64, floats, ...).
    """
    resolved = np.dtype(dtype)
    if resolved not in _CODE_OF:
        names = [np.dtype(d).name for d in DTYPE_CODES.values()]
        raise ValueError(
            f"dtype {resolved.name} has no code in the Megatron index layout; use one of {names}"
        )
    return resolved


def default_dtype(vocab_size: int) -> np.dtype:
    """The dtype Megatron's preprocessing picks for a vocabulary (DType.optimal_dtype in indexed_dataset.py):
    uint16 below 65,500 ids, else int32."""
    return np.dtype(np.uint16 if vocab_size < 65500 else np.int32)


class IndexedDataset:
    """A Megatron indexed dataset, opened and checked: random access to its S sequences, memory-mapped.

    `dataset[i]` is a read-only view `[L_i]` (the file's dtype) of sequence i; `get(i, offset, length)` a
    part of it. Opening reads the .idx header and arrays and checks them against both files, so a broken pair
    fails here with one line naming the file and the problem, not later in training.

    Attributes:
      prefix: the path prefix.
      dtype: the token dtype (a layout integer dtype).
      sequence_lengths: int32 `[S]` tokens per sequence (read-only, memory-mapped).
      sequence_pointers: int64 `[S]` byte offsets into the .bin.
      document_indices: int64 `[D]`, 0 then the sequence count at the end of each document.

    Raises:
      FileNotFoundError: PREFIX.idx or PREFIX.bin is missing.
      ValueError: a wrong magic, a version other than 1, a float or unknown dtype code, a truncated .idx,
        negative lengths, document indices that are not 0 ... S non-decreasing (an index past the end), a
        sequence that ends past the end of the .bin (truncated .bin), or bytes after the last sequence.
    """

    def __init__(self, prefix: str | os.PathLike):
        self.prefix = os.fspath(prefix)
        idx, bin_ = index_path(prefix), data_path(prefix)
        for path in (idx, bin_):
            if not os.path.isfile(path):
                raise FileNotFoundError(
                    f"{path}: no such file (a Megatron dataset needs PREFIX.bin and PREFIX.idx)"
                )
        index = np.memmap(idx, dtype=np.uint8, mode="r") if os.path.getsize(idx) else np.zeros(0, np.uint8)
        if bytes(index[: len(MAGIC)]) != MAGIC:
            raise ValueError(
                f"{idx}: not a Megatron index (magic {bytes(index[: len(MAGIC)])!r}, expected {MAGIC!r})"
            )
        if index.size < _HEADER:
            raise ValueError(f"{idx}: truncated ({index.size} bytes, the header alone has {_HEADER})")
        version, code, count, documents = struct.unpack("<QBQQ", bytes(index[len(MAGIC) : _HEADER]))
        if version != VERSION:
            raise ValueError(f"{idx}: index version {version}, only version {VERSION} is read")
        if code not in DTYPE_CODES:
            what = f"{FLOAT_CODES[code]}, which holds no token ids" if code in FLOAT_CODES else "unknown"
            raise ValueError(f"{idx}: dtype code {code} ({what})")
        self.dtype = np.dtype(DTYPE_CODES[code])
        needed = _HEADER + 12 * count + 8 * documents
        # Multimodal datasets append one int8 mode per sequence; those are read like text ones.
        if index.size not in (needed, needed + count):
            state = "truncated" if index.size < needed else "longer than its arrays"
            raise ValueError(
                f"{idx}: {state} ({index.size} bytes; {count} sequences and {documents} document indices "
                f"need {needed})"
            )
        self.sequence_lengths = np.frombuffer(index, np.int32, count, _HEADER)
        self.sequence_pointers = np.frombuffer(index, np.int64, count, _HEADER + 4 * count)
        self.document_indices = np.frombuffer(index, np.int64, documents, _HEADER + 12 * count)
        self._check(idx, bin_)
        size = os.path.getsize(bin_)
        self._data = np.memmap(bin_, dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)

    def _check(self, idx: str, bin_: str) -> None:
        lengths, pointers, documents = self.sequence_lengths, self.sequence_pointers, self.document_indices
        if lengths.size and lengths.min() < 0:
            raise ValueError(f"{idx}: sequence {int(np.argmin(lengths))} has a negative length")
        if (
            documents.size == 0
            or documents[0] != 0
            or documents[-1] != lengths.size
            or np.any(np.diff(documents) < 0)
        ):
            raise ValueError(
                f"{idx}: the document indices must rise from 0 to the sequence count {lengths.size}; an index "
                "points past the end (a broken or mismatched .idx)"
            )
        size = os.path.getsize(bin_)
        ends = pointers + lengths.astype(np.int64) * self.dtype.itemsize
        if pointers.size and (pointers.min() < 0 or ends.max() > size):
            bad = int(np.argmax((pointers < 0) | (ends > size)))
            raise ValueError(
                f"{bin_}: {size} bytes, but sequence {bad} of {idx} spans bytes [{int(pointers[bad])}, "
                f"{int(ends[bad])}): the .bin is truncated or the index points past its end"
            )
        end = int(ends.max()) if ends.size else 0
        if size != end:
            raise ValueError(
                f"{bin_}: {size} bytes but its index ends at byte {end}: the .bin and .idx are from different "
                "writes"
            )

    def __len__(self) -> int:
        return int(self.sequence_lengths.size)

    def get(self, index: int, offset: int = 0, length: int | None = None) -> np.ndarray:
        """Tokens `[length]` of sequence `index` from token `offset` (None: to its end); a read-only view.

        Raises:
          IndexError: `index` outside [0, S) or a span outside the sequence.
        """
        if not 0 <= index < len(self):
            raise IndexError(f"{self.prefix}: sequence {index} outside [0, {len(self)})")
        full = int(self.sequence_lengths[index])
        length = full - offset if length is None else length
        if offset < 0 or length < 0 or offset + length > full:
            raise IndexError(
                f"{self.prefix}: tokens [{offset}, {offset + length}) of a {full}-token sequence"
            )
        start = int(self.sequence_pointers[index]) + offset * self.dtype.itemsize
        return np.frombuffer(self._data, self.dtype, length, start)

    def __getitem__(self, index: int) -> np.ndarray:
        return self.get(index)

    def __iter__(self):
        return (self.get(i) for i in range(len(self)))


def read_documents(prefix: str | os.PathLike) -> IndexedDataset:
    """The sequences (documents) of the Megatron dataset at `prefix`: a checked, memory-mapped sequence of
    1-D integer arrays (`IndexedDataset`; raises as it does)."""
    return IndexedDataset(prefix)


class IndexedDatasetWriter:
    """Writes a new Megatron dataset at `prefix`, one sequence per document, atomically.

    Use as a context manager: `with IndexedDatasetWriter(prefix, np.uint16) as writer: writer.write(tokens)`.
    The .bin and .idx are written to temporary files in the prefix's directory and renamed into place only
    when the block exits without an error (the .bin first, so a reader never sees an index without its data);
    on any error nothing is left behind.

    Args:
      prefix: where to write PREFIX.bin and PREFIX.idx.
      dtype: a layout integer dtype (`token_dtype`); every id must fit in it.
      overwrite: replace an existing pair.

    Raises:
      ValueError: a dtype without a layout code.
      FileExistsError: PREFIX.bin or PREFIX.idx exists and not `overwrite`.
    """

    def __init__(self, prefix: str | os.PathLike, dtype: Any, *, overwrite: bool = False):
        self.prefix = os.fspath(prefix)
        self.dtype = token_dtype(dtype)
        if not overwrite:
            for path in (index_path(prefix), data_path(prefix)):
                if os.path.exists(path):
                    raise FileExistsError(f"{path} exists; choose a new prefix or pass overwrite")
        self.lengths: list[int] = []
        self.tokens = 0
        self._limits = np.iinfo(self.dtype)

    def __enter__(self) -> IndexedDatasetWriter:
        self._stack = contextlib.ExitStack()
        self._bin_file = self._stack.enter_context(
            open(self._stack.enter_context(files.atomic_path(data_path(self.prefix))), "wb")
        )
        return self

    def write(self, tokens: Any) -> None:
        """Appends one document (1-D integer ids) as one sequence.

        Raises:
          ValueError: an empty document, non-integer ids, or an id the dtype cannot hold.
        """
        tokens = np.asarray(tokens)
        where = f"{data_path(self.prefix)}: document {len(self.lengths)}"
        if tokens.ndim != 1 or tokens.size == 0:
            raise ValueError(f"{where} must be a non-empty 1-D array of ids, got shape {tokens.shape}")
        if not np.issubdtype(tokens.dtype, np.integer):
            raise ValueError(f"{where}: ids must be integers, got {tokens.dtype}")
        low, high = int(tokens.min()), int(tokens.max())
        if low < self._limits.min or high > self._limits.max:
            bad = high if high > self._limits.max else low
            raise ValueError(
                f"{where} holds id {bad}, outside [{self._limits.min}, {self._limits.max}] of dtype "
                f"{self.dtype.name}; write with a wider dtype"
            )
        self._bin_file.write(tokens.astype(self.dtype.newbyteorder("<"), copy=False).tobytes())
        self.lengths.append(int(tokens.size))
        self.tokens += int(tokens.size)

    def _index_bytes(self) -> bytes:
        lengths = np.asarray(self.lengths, np.int64)
        pointers = np.concatenate([[0], np.cumsum(lengths[:-1] * self.dtype.itemsize)])
        return b"".join(
            [
                MAGIC,
                struct.pack("<QBQQ", VERSION, _CODE_OF[self.dtype], len(lengths), len(lengths) + 1),
                lengths.astype("<i4").tobytes(),
                pointers.astype("<i8").tobytes(),
                np.arange(len(lengths) + 1, dtype="<i8").tobytes(),
            ]
        )

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is None and not self.lengths:
            error = ValueError(f"{self.prefix}: no documents to write; the input is empty")
            self._stack.__exit__(ValueError, error, None)  # removes the temporary .bin
            raise error
        if exc_type is not None:
            self._stack.__exit__(exc_type, exc, traceback)
            return
        self._stack.close()  # the .bin first: a reader never finds an index without its data
        try:
            files.write_bytes(index_path(self.prefix), self._index_bytes())
        except BaseException:
            os.remove(data_path(self.prefix))
            raise


def write_indexed_dataset(
    prefix: str | os.PathLike, documents: Iterable[Any], dtype: Any, *, overwrite: bool = False
) -> dict[str, int]:
    """Writes `documents` (1-D integer id arrays) as the Megatron dataset PREFIX.bin + PREFIX.idx.

    One sequence per document, document indices 0, 1, ..., N (as Megatron's GPT preprocessing writes them),
    index version 1; atomic (`IndexedDatasetWriter`).

    Args:
      prefix: the path prefix.
      documents: the documents, in order.
      dtype: a layout integer dtype: uint8, int8, int16, uint16, int32 or int64.
      overwrite: replace an existing pair.

    Returns:
      {"documents": N, "tokens": total ids written}.

    Raises:
      ValueError / FileExistsError: as `IndexedDatasetWriter` (nothing is written).
    """
    with IndexedDatasetWriter(prefix, dtype, overwrite=overwrite) as writer:
        for tokens in documents:
            writer.write(tokens)
    return {"documents": len(writer.lengths), "tokens": writer.tokens}


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def parse_blend(value: str | Sequence[str]) -> tuple[tuple[str, ...], tuple[float, ...] | None]:
    """The prefixes and weights of a Megatron blend, as Megatron's `--data-path` words are read.

    `value` is one string of whitespace-separated words or a list of words. An even number of words whose
    odd ones (1st, 3rd, ...) are all numbers is weighted ("0.3 /data/a 0.7 /data/b"); otherwise every word
    is a prefix and the weights are None. A number among unweighted words is refused: it is a blend with a
    word missing or out of place ("0.3 /data/a 0.7"), not a prefix.

    Raises:
      ValueError: no prefix, a weight <= 0, or a number among unweighted words.
    """
    words = tuple(value.split()) if isinstance(value, str) else tuple(str(w).strip() for w in value)
    if not words:
        raise ValueError("paths is empty: name a prefix or a blend 'w1 prefix1 w2 prefix2'")
    weights = None
    if len(words) % 2 == 0:
        try:
            weights = tuple(float(w) for w in words[::2])
        except ValueError:
            weights = None
    if weights is None:
        if numbers := [w for w in words if _is_number(w)]:
            raise ValueError(
                f"paths {' '.join(words)!r}: {numbers[0]!r} reads as a weight, but the words are not weight "
                "and prefix pairs; write a blend as 'w1 prefix1 w2 prefix2', or prefixes alone"
            )
        return words, None
    if any(not w > 0 for w in weights):
        raise ValueError(f"paths {' '.join(words)!r}: blend weights must be > 0, got {list(weights)}")
    return words[1::2], weights


class _Documents:
    """Documents of several prefixes as one random-access sequence of int32 arrays, through an index list
    (global document ids: the prefixes' sequences laid end to end); ids are checked against the vocabulary."""

    def __init__(self, datasets: Sequence[IndexedDataset], selection: np.ndarray, vocab_size: int):
        self.datasets, self.selection, self.vocab_size = list(datasets), selection, vocab_size
        self.starts = np.cumsum([0] + [len(d) for d in self.datasets]).tolist()
        # Viewed as unsigned, negative ids are huge: one reduction checks both ends of the range.
        self.unsigned = [np.dtype(f"u{d.dtype.itemsize}") for d in self.datasets]

    def __len__(self) -> int:
        return len(self.selection)

    def __getitem__(self, index: int) -> np.ndarray:
        document = int(self.selection[index])
        part = bisect.bisect_right(self.starts, document) - 1
        sequence = document - self.starts[part]
        tokens = self.datasets[part].get(sequence)
        if tokens.size and int(tokens.view(self.unsigned[part]).max()) >= self.vocab_size:
            raise ValueError(
                f"{data_path(self.datasets[part].prefix)}: sequence {sequence} holds an id outside "
                f"[0, {self.vocab_size}); the data is corrupt or from another tokenizer"
            )
        return tokens.astype(np.int32, copy=False)  # int32 files: the read-only memory-mapped view itself


def blend_selection(
    datasets: Sequence[IndexedDataset], weights: Sequence[float] | None, seed: int
) -> np.ndarray:
    """int64 global document ids of one epoch of a blend (prefixes laid end to end).

    Without weights: every document once. With weights w_i (normalized), an epoch holds as many tokens as the
    prefixes together, prefix i's share w_i of them: n_i = max(1, round(w_i * total / mean_i)) of its
    documents, that is every document n_i // N_i times and then the first n_i % N_i of a permutation of them
    by `seed` (token shares as a Megatron blend gives them; which documents fill a partial pass is fixed).
    """
    starts = np.cumsum([0] + [len(d) for d in datasets])
    if weights is None:
        return np.arange(starts[-1], dtype=np.int64)
    weights = np.asarray(weights, np.float64) / np.sum(weights)
    tokens = np.array([int(np.sum(d.sequence_lengths, dtype=np.int64)) for d in datasets], np.float64)
    pieces = []
    for i, dataset in enumerate(datasets):
        count = len(dataset)
        wanted = max(1, round(weights[i] * tokens.sum() / (tokens[i] / count)))
        rng = np.random.default_rng([seed, i])
        ids = np.concatenate(
            [np.tile(np.arange(count), wanted // count), rng.permutation(count)[: wanted % count]]
        )
        pieces.append(np.sort(ids) + starts[i])
    return np.concatenate(pieces)


@register_kind
@dataclasses.dataclass(frozen=True)
class MegatronSpec(DocumentSpec):
    """Megatron indexed datasets (module docstring): `paths` is a prefix, several, or a weighted blend
    ("0.3 /data/web 0.7 /data/code"); `seed` fixes which documents fill a down-weighted prefix's partial pass.
    Order "sorted" is refused: the files hold no document scores.
    """

    kind: ClassVar[str] = "megatron"
    paths: tuple[str, ...] = ()
    seed: int = 0

    def __post_init__(self):
        words = paths_tuple(self.paths)
        words = tuple(w for word in words for w in word.split())
        check_paths(words, self.kind)
        parse_blend(words)
        object.__setattr__(self, "paths", words)
        check_number("seed", self.seed, low=0, integer=True)
        if self.order == "sorted":
            raise ValueError("order='sorted' needs document scores, which Megatron datasets do not hold")
        super().__post_init__()

    def load(self, name: str, tokenizer) -> Component:
        prefixes, weights = parse_blend(self.paths)
        datasets = [IndexedDataset(prefix) for prefix in prefixes]
        for dataset in datasets:
            check_tokenizer(dataset, tokenizer)
        selection = blend_selection(datasets, weights, self.seed)
        lengths = np.concatenate([d.sequence_lengths for d in datasets])[selection]
        return Component(name, _Documents(datasets, selection, tokenizer.vocab_size), float(lengths.mean()))

    def check_inputs(self) -> None:
        for prefix in parse_blend(self.paths)[0]:
            IndexedDataset(prefix)

    def describe(self) -> dict[str, Any]:
        prefixes, weights = parse_blend(self.paths)
        records = []
        for prefix in prefixes:
            written = written_manifest(prefix) or {}
            records.append(
                {
                    "prefix": prefix,
                    **{k: written.get(k) for k in ("source", "licence", "documents", "tokens")},
                }
            )
        licences = sorted({str(r["licence"]) for r in records if r["licence"]})
        return {
            "kind": self.kind,
            "prefixes": records,
            "weights": weights and list(weights),
            "licence": "; ".join(licences) or None,
        }


def written_manifest(prefix: str) -> dict[str, Any] | None:
    """The manifest `experiments.tokenize_data --format=megatron` writes as PREFIX.json (tokenizer, source,
    licence, counts), or None for data from elsewhere (no PREFIX.json).

    Raises:
      ValueError: PREFIX.json is not a JSON object with a tokenizer record.
    """
    path = os.fspath(prefix) + ".json"
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            written = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not JSON ({error})") from None
    if not isinstance(written, dict) or not isinstance(written.get("tokenizer"), dict):
        raise ValueError(f"{path}: no tokenizer record; it was not written by experiments.tokenize_data")
    return written


def check_tokenizer(dataset: IndexedDataset, tokenizer) -> None:
    """Checks that `tokenizer` can be the dataset's: its dtype holds ids up to vocab_size - 1
    (`check_dtype_holds`) and, when PREFIX.json exists, the data was tokenized with it (same sha256).

    Raises:
      ValueError: one line naming PREFIX.idx; `run_tokenizer.TokenizerMismatchError` naming PREFIX.
    """
    check_dtype_holds(dataset, tokenizer.vocab_size)
    written = written_manifest(dataset.prefix)
    if written is not None:
        check_tokenized_with(dataset.prefix, written["tokenizer"], tokenizer)


def check_dtype_holds(dataset: IndexedDataset, vocab_size: int) -> None:
    """Raises ValueError (naming PREFIX.idx) when the dataset's dtype cannot hold ids up to vocab_size - 1."""
    largest = int(np.iinfo(dataset.dtype).max)
    if largest < vocab_size - 1:
        raise ValueError(
            f"{index_path(dataset.prefix)}: dtype {dataset.dtype.name} holds ids up to {largest}, but the "
            f"tokenizer has {vocab_size} ids; re-write the data with a wider dtype (int32)"
        )
