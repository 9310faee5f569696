"""A straightforward transcription of the Megatron-LM dataset logic the tests compare against.

Written from the behaviour of Megatron-LM's megatron/core/datasets/indexed_dataset.py (reader and builder),
gpt_dataset.py (document, sample and shuffle indices, the separate-last-epoch rule, sample assembly,
apply_goldfish), blended_dataset.py with blended_megatron_dataset_builder.py (blend sizes and index) and
helpers.cpp (build_sample_idx, build_blending_indices) as docs/data.md describes them: plain loops and
struct reads, no vectorization, so that it is easy to check line by line against those files.
"""

import math
import re
import struct

import numpy as np

CODES = {
    1: np.uint8,
    2: np.int8,
    3: np.int16,
    4: np.int32,
    5: np.int64,
    6: np.float64,
    7: np.float32,
    8: np.uint16,
}


def read_indexed(prefix):
    """IndexedDataset(prefix)[i] for every i: the reader's header walk, then one read per sequence."""
    with open(prefix + ".idx", "rb") as stream:
        assert stream.read(9) == b"MMIDIDX\x00\x00"
        assert struct.unpack("<Q", stream.read(8))[0] == 1
        dtype = np.dtype(CODES[struct.unpack("<B", stream.read(1))[0]])
        sequences = struct.unpack("<Q", stream.read(8))[0]
        documents = struct.unpack("<Q", stream.read(8))[0]
        lengths = np.frombuffer(stream.read(4 * sequences), np.int32)
        pointers = np.frombuffer(stream.read(8 * sequences), np.int64)
        document_indices = np.frombuffer(stream.read(8 * documents), np.int64)
    assert lengths.shape[0] == document_indices[-1]
    out = []
    with open(prefix + ".bin", "rb") as data:
        for pointer, length in zip(pointers, lengths):
            data.seek(int(pointer))
            out.append(np.frombuffer(data.read(int(length) * dtype.itemsize), dtype))
    return out, document_indices


def write_indexed(prefix, documents, dtype):
    """IndexedDatasetBuilder(prefix.bin, dtype): add_item + end_document per document, then finalize."""
    lengths, document_indices = [], [0]
    with open(prefix + ".bin", "wb") as data:
        for document in documents:
            array = np.array(document, dtype=dtype)
            data.write(array.tobytes(order="C"))
            lengths.append(array.size)
            document_indices.append(len(lengths))
    code = {np.dtype(v): k for k, v in CODES.items()}[np.dtype(dtype)]
    pointers, position = [], 0
    for length in lengths:
        pointers.append(position)
        position += length * np.dtype(dtype).itemsize
    with open(prefix + ".idx", "wb") as index:
        index.write(b"MMIDIDX\x00\x00")
        index.write(struct.pack("<Q", 1))
        index.write(struct.pack("<B", code))
        index.write(struct.pack("<Q", len(lengths)))
        index.write(struct.pack("<Q", len(document_indices)))
        index.write(np.array(lengths, np.int32).tobytes())
        index.write(np.array(pointers, np.int64).tobytes())
        index.write(np.array(document_indices, np.int64).tobytes())


def build_sample_idx(sizes, document_idx, seq_length, num_epochs, tokens_per_epoch, add_extra):
    """helpers.cpp build_sample_idx (drop_last_partial_sequence = true), loop for loop."""
    num_samples = (num_epochs * tokens_per_epoch - add_extra) // seq_length
    sample_idx = [(0, 0)]
    document_idx_index, doc_offset = 0, 0
    while len(sample_idx) <= num_samples:
        remaining = seq_length + add_extra
        while remaining != 0:
            document_length = int(sizes[document_idx[document_idx_index]]) - doc_offset
            remaining -= document_length
            if remaining <= 0:
                doc_offset += remaining + document_length - add_extra
                remaining = 0
            else:
                if document_idx_index == len(document_idx) - 1:
                    doc_offset = int(sizes[document_idx[document_idx_index]]) - add_extra
                    break
                document_idx_index += 1
                doc_offset = 0
        sample_idx.append((document_idx_index, doc_offset))
    return np.array(sample_idx, np.int64)


def build_blending_indices(weights, size):
    """helpers.cpp build_blending_indices: the dataset with the largest sampling error goes next."""
    current = [0] * len(weights)
    dataset_index, dataset_sample_index = [], []
    for sample in range(size):
        sample_double = max(float(sample), 1.0)
        best, best_error = 0, weights[0] * sample_double - current[0]
        for dataset in range(1, len(weights)):
            error = weights[dataset] * sample_double - current[dataset]
            if error > best_error:
                best, best_error = dataset, error
        dataset_index.append(best)
        dataset_sample_index.append(current[best])
        current[best] += 1
    return np.array(dataset_index, np.int16), np.array(dataset_sample_index, np.int64)


def normalize(weights):
    w = np.array(weights, dtype=np.float64)
    return (w / np.sum(w)).tolist()


def split_range(split, count, part=0):
    """parse_and_normalize_split + convert_split_vector_to_split_matrix, bookend of `part` (0 train, 1 valid,
    2 test), rounded to sequence indices as _build_megatron_dataset_splits rounds them."""
    vector = list(map(float, re.findall(r"[.0-9]+", split)))
    vector = normalize(vector + [0.0] * (3 - len(vector)))
    expansion = [0]
    for ratio in vector:
        expansion.append(expansion[-1] + ratio)
    beg, end = expansion[part], expansion[part + 1]
    return int(round(beg * float(count))), int(round(end * float(count)))


class GPTDatasetReference:
    """GPTDataset of one prefix's split part (0 train, 1 valid, 2 test): indices built as gpt_dataset.py does
    (drop_last_partial_sequence true, the default of every part), samples as it reads them."""

    def __init__(self, documents, split, num_samples, seq_length, seed, add_extra, part=0):
        self.documents, self.seq_length, self.add_extra = documents, seq_length, int(add_extra)
        sizes = np.array([len(d) for d in documents], np.int32)
        beg, end = split_range(split, len(documents), part)
        indices = np.arange(beg, end, dtype=np.int32)
        tokens_per_epoch = int(np.sum(sizes[indices]))
        num_epochs = 1
        if num_samples is not None:
            total = tokens_per_epoch
            while total < num_samples * seq_length + self.add_extra:
                num_epochs += 1
                total += tokens_per_epoch
        separate = False
        if num_epochs > 1:
            sans_final = ((num_epochs - 1) * tokens_per_epoch - self.add_extra) // seq_length
            from_final = num_samples - sans_final
            per_epoch = (tokens_per_epoch - self.add_extra) // seq_length
            assert 0 <= from_final <= per_epoch + 1
            separate = from_final < int(0.80 * per_epoch)
        rng = np.random.RandomState(seed)
        if separate:
            first = self._document_index(indices, num_epochs - 1, rng)
            self.document_index = np.concatenate([first, self._document_index(indices, 1, rng)])
        else:
            self.document_index = self._document_index(indices, num_epochs, rng)
        self.sample_index = build_sample_idx(
            sizes, self.document_index, seq_length, num_epochs, tokens_per_epoch, self.add_extra
        )
        total = self.sample_index.shape[0] - 1
        first_range = sans_final if separate else total
        first = np.arange(first_range, dtype=np.uint32)
        rng.shuffle(first)
        if first_range == total:
            self.shuffle_index = first
        else:
            last = np.arange(first_range, total, dtype=np.uint32)
            rng.shuffle(last)
            self.shuffle_index = np.concatenate([first, last])
        self.num_epochs, self.separate_final_epoch = num_epochs, separate

    @staticmethod
    def _document_index(indices, num_epochs, rng):
        document_index = np.mgrid[0:num_epochs, 0 : len(indices)][1]
        document_index[:] = indices
        document_index = document_index.reshape(-1).astype(np.int32)
        rng.shuffle(document_index)
        return document_index

    def __len__(self):
        return self.sample_index.shape[0] - 1

    def __getitem__(self, idx):
        idx = self.shuffle_index[idx]
        beg, beg_offset = self.sample_index[idx]
        end, end_offset = self.sample_index[idx + 1]
        parts = []
        if beg == end:
            document = self.documents[self.document_index[beg]]
            parts.append(document[beg_offset : end_offset + self.add_extra])
        else:
            for i in range(beg, end + 1):
                document = self.documents[self.document_index[i]]
                offset = 0 if i > beg else beg_offset
                parts.append(document[offset:] if i < end else document[offset : end_offset + self.add_extra])
        return np.concatenate(parts).astype(np.int64)


class BlendedReference:
    """BlendedMegatronDatasetBuilder's train split of a weighted blend: per-prefix GPTDatasets of ceil(size *
    weight) samples plus a 0.5% margin, then BlendedDataset's index over sum(ceil(size * weight)) samples."""

    def __init__(self, documents_per_prefix, weights, split, num_samples, seq_length, seed, add_extra):
        weights = normalize(weights)
        targets = [int(math.ceil(num_samples * w)) for w in weights]
        self.buffers = [int(math.ceil(math.ceil(num_samples * w) * (1 + 0.5 / 100))) for w in weights]
        buffers = self.buffers
        self.datasets = [
            GPTDatasetReference(documents, split, n, seq_length, seed, add_extra)
            for documents, n in zip(documents_per_prefix, buffers)
        ]
        self.dataset_index, self.dataset_sample_index = build_blending_indices(
            normalize(weights), sum(targets)
        )

    def __len__(self):
        return len(self.dataset_index)

    def __getitem__(self, idx):
        return self.datasets[self.dataset_index[idx]][self.dataset_sample_index[idx]]


def apply_goldfish(labels, k, h, table):
    """gpt_dataset.py apply_goldfish on one sample's labels with the torch float32 `table` (torch.rand of the
    fork's seed): True where the label is dropped."""
    import torch

    labels = torch.from_numpy(np.asarray(labels, np.int64))
    keys = labels.unfold(0, h, 1).prod(dim=-1) % 1_000_003
    dropped = torch.zeros(labels.shape, dtype=torch.bool)
    dropped[h - 1 :] = table[keys] < 1 / k
    return dropped.numpy()
