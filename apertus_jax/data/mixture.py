"""Components and stage mixtures as Grain MapDatasets of `(component index, document index)` pairs.

Per component (config in `apertus_jax.data.config`), in this order:
1. an optional fixed subset (`take`, chosen with `split_seed`: the same in every stage and epoch),
2. an optional "sorted" order (ascending document score),
3. this host's disjoint share: every `process_count`-th document from `process_index`,
4. a fixed index list as a new Grain source, so that later epochs can never reach the documents left out
   (Grain's `shuffle -> slice -> repeat` would re-draw the subset each epoch: the slice passes the epoch
   on to the shuffle below it),
5. "shuffle" order: `MapDataset.shuffle(seed)`, which Grain reseeds per epoch (a fresh order each epoch),
6. `repeat(epochs)` (None: forever).
Components are loaded by `apertus_jax.data.components`; the packer reads the documents themselves
(`Component.documents[index]`), outside the Grain graph.
A stage mixes its components with `MapDataset.mix` in document proportions `weight / mean tokens per
document`, i.e. token shares as configured.

Length buckets (`length_buckets`, e.g. to upsample long documents for context extension, Apertus report
section 3.4): a component's host documents are grouped by token length, each group is a stream of its own
(steps 4-6 per group), and the groups are mixed by the same rule, `share / mean tokens per document`, so each
bucket gives its configured share of the component's tokens; a bucket with a larger share than its natural
one repeats its documents more often.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import grain
import numpy as np

from apertus_jax.data.documents import Component
from apertus_jax.data.kinds import DocumentSpec


def derive_seed(*parts: int | str) -> int:
    """A uint32 seed from integers and names (names via crc32: stable across processes and runs)."""
    entropy = [zlib.crc32(p.encode()) if isinstance(p, str) else int(p) for p in parts]
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])


class _Tagged:
    """A host's document index list whose elements are `(component index, document index)`."""

    def __init__(self, indices: Sequence[int], component_index: int):
        self.indices, self.component_index = indices, component_index

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, position: int) -> tuple[int, int]:
        return self.component_index, int(self.indices[position])


def host_documents(
    component: Component, spec: DocumentSpec, *, split_seed: int, process_index: int, process_count: int
) -> Sequence[int]:
    """This host's document indices of a component (steps 1-3 of the module docstring).

    Raises:
      ValueError: `take` exceeds the documents, or this host would get no document.
    """
    count = len(component.documents)
    indices: Sequence[int] = range(count)
    if spec.take is not None:
        if spec.take > count:
            raise ValueError(f"component {component.name!r}: take={spec.take} > its {count} documents")
        chosen = np.random.default_rng(derive_seed(split_seed, component.name)).permutation(count)
        indices = np.sort(chosen[: spec.take])
    if spec.order == "sorted":
        indices = np.asarray(indices)[np.argsort(component.scores[indices], kind="stable")]
    indices = indices[process_index::process_count]
    if len(indices) == 0:
        raise ValueError(
            f"component {component.name!r}: {len(range(count)) if spec.take is None else spec.take} "
            f"documents cannot give every one of {process_count} processes a document"
        )
    return indices


def component_dataset(
    component: Component,
    component_index: int,
    spec: DocumentSpec,
    *,
    seed: int,
    split_seed: int,
    process_index: int,
    process_count: int,
) -> grain.MapDataset:
    """This host's `(component index, document index)` stream of one component in one stage (module
    docstring, steps 1-6)."""
    indices = host_documents(
        component, spec, split_seed=split_seed, process_index=process_index, process_count=process_count
    )
    dataset = grain.MapDataset.source(_Tagged(indices, component_index))
    if spec.order == "shuffle":
        dataset = dataset.shuffle(seed=seed)
    return dataset.repeat(spec.epochs)


def mix_components(
    datasets: Sequence[grain.MapDataset], token_weights: Sequence[float], mean_tokens: Sequence[float]
) -> grain.MapDataset:
    """One stream drawing documents in proportions `token weight / mean tokens per document`."""
    if len(datasets) == 1:
        return datasets[0]
    proportions = [w / m for w, m in zip(token_weights, mean_tokens)]
    return grain.MapDataset.mix(list(datasets), proportions)


def length_bucket_of(lengths: np.ndarray, edges: Sequence[int]) -> np.ndarray:
    """Bucket index of each length: 0 below `edges[0]`, b for `edges[b-1] <= length < edges[b]`, len(edges)
    at or above the last edge."""
    return np.searchsorted(np.asarray(edges), lengths, side="right")


def bucketed_component_dataset(
    component: Component,
    component_index: int,
    spec: DocumentSpec,
    *,
    seed: int,
    split_seed: int,
    process_index: int,
    process_count: int,
) -> tuple[grain.MapDataset, float, list[int]]:
    """This host's stream of a component with `spec.length_buckets` (module docstring): returns (stream,
    mean tokens per drawn document, host documents per bucket). The mean is `1 / sum(share_b / mean_b)`
    over the buckets, what the stage mixture needs to give the component its token share.

    Reads every host document once for its length.

    Raises:
      ValueError: a bucket with a share > 0 holds no document of this host.
    """
    indices = np.asarray(
        host_documents(
            component, spec, split_seed=split_seed, process_index=process_index, process_count=process_count
        )
    )
    lengths = np.fromiter((len(component.documents[int(i)]) for i in indices), np.int64, len(indices))
    buckets = length_bucket_of(lengths, spec.length_buckets.edges)
    shares = spec.length_buckets.token_shares
    counts = [int(np.sum(buckets == b)) for b in range(len(shares))]
    datasets, weights, means = [], [], []
    for b, share in enumerate(shares):
        if share == 0:
            continue
        if counts[b] == 0:
            raise ValueError(
                f"component {component.name!r}: length bucket {b} (edges {list(spec.length_buckets.edges)}) "
                f"has token share {share} but no document on this host; change the edges or shares"
            )
        dataset = grain.MapDataset.source(_Tagged(indices[buckets == b], component_index))
        if spec.order == "shuffle":
            dataset = dataset.shuffle(seed=derive_seed(seed, "length_bucket", b))
        datasets.append(dataset.repeat(spec.epochs))
        weights.append(share)
        means.append(float(np.mean(lengths[buckets == b])))
    mean_tokens = 1.0 / sum(w / m for w, m in zip(weights, means))
    return mix_components(datasets, weights, means), mean_tokens, counts
