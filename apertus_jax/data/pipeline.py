"""The default batch source's data: stages -> mixtures -> packed rows -> masks + Goldfish -> batches.

    it = TrainIterator(pipeline, tokenizer, seq_len=4096, batch_size=plan_or_int,
                       process_index=jax.process_index(), process_count=jax.process_count(), seed=0)
    batch = next(it)   # dict of int32 numpy arrays [B_host, T]: tokens, targets, positions, segment_ids,
                       # loss_mask; B_host = global batch of this step / process_count

`pipeline` is a `PipelineSpec` (`apertus_jax.data.config.parse_pipeline` builds one from a config dict).

Batch size per step: an int (global rows per batch), a callable `step -> global rows`, or an object with
`batch_tokens_at_step(step)` (`apertus_jax.optim.BatchSizePlan`; tokens per batch / seq_len rows). Rows
are produced one at a time and grouped per step, so a batch-size change never skips or repeats a row.

Multi-host: every process builds the pipeline with its own `process_index`; it reads a disjoint share of
every component's documents and yields its `global / process_count` rows of each step. The trainer builds
the global batch with `jax.make_array_from_process_local_data(sharding, local_batch)` for each array
(sharding over the mesh's data axes, batch dimension first).

Stages end at global token boundaries: per host, stage s ends after `ceil(until_tokens / (seq_len *
process_count))` rows. Each stage has its own seed; a stage starts from fresh documents of its own mix
(the partial document at the boundary is not continued).

Injected components (`InjectedSpec`: probes, canaries; `apertus_jax.data.memorization.injection`) are not mixed by weight:
their documents are inserted into the first stage's document stream at planned positions, so the packer's
position also fixes which of them have been seen (`consumed()["exposures"]`).

State (`get_state()` / `set_state()`, JSON-serializable, saved in Orbax checkpoints with
`grain.checkpoint.CheckpointSave(it)` / restored with `grain.checkpoint.CheckpointRestore(it)`): the step,
rows produced, the stage, the packer's position `(document, offset)`, per-component document counts,
per-component target tokens over all stages (`consumed()["tokens"]`, what the run's provenance records) and, for
components with `length_buckets`, their edges, token shares and host documents per bucket (informational; the
fingerprint already covers the configuration).
A restored iterator yields bitwise the batches an uninterrupted one would, across stage and epoch
boundaries, mid-document and after batch-size changes. The state carries a fingerprint of the normalized
pipeline (`PipelineSpec.to_dict()`), seq_len, seed, tokenizer and process layout; restoring into a different
pipeline raises.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from typing import Any

import grain
import numpy as np
from absl import logging

from apertus_jax.data import mixture
from apertus_jax.data.config import DataConfig, PipelineSpec
from apertus_jax.data.goldfish.drop_masks import GoldfishSpec, dropped_fraction
from apertus_jax.data.masks import document_masks
from apertus_jax.data.memorization import injection
from apertus_jax.data.packing import PackedRows
from apertus_jax.data.process_shards import ShardedSource, sharded

# The layout of `get_state()`: a state of another version is refused with one line.
STATE_VERSION = 2


def rows_to_batch(
    rows: np.ndarray, tokenizer, goldfish: GoldfishSpec, history: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """The trainer's batch from packed rows.

    Args:
      rows: int32 `[B, T + 1]` packed rows.
      tokenizer: gives `eod_id` and `pad_id`.
      goldfish: the Goldfish settings (k = 0: off); drops only zero the loss mask.
      history: int64 `[B, h - 1]`, per row the tokens of its first document before its first target (-1
        before the document start; `PackedRows.history`); used by the content-only "mixed" hash, None
        means every row starts a document.

    Returns:
      dict of int32 `[B, T]`: tokens (inputs), targets, positions, segment_ids, loss_mask.
    """
    tokens, targets = rows[:, :-1], rows[:, 1:]
    segment_ids, positions, loss_mask = document_masks(tokens, tokenizer.eod_id, tokenizer.pad_id, targets)
    if goldfish.k:
        loss_mask[goldfish.drop_mask(targets, tokenizer, history)] = 0
    return {
        "tokens": np.ascontiguousarray(tokens),
        "targets": np.ascontiguousarray(targets),
        "positions": positions,
        "segment_ids": segment_ids,
        "loss_mask": loss_mask,
    }


def _batch_rule(batch_size: Any, seq_len: int) -> Callable[[int], int]:
    if isinstance(batch_size, int):
        return lambda step: batch_size
    if hasattr(batch_size, "batch_tokens_at_step"):

        def rows(step: int) -> int:
            tokens = batch_size.batch_tokens_at_step(step)
            if tokens % seq_len:
                raise ValueError(
                    f"batch of {tokens} tokens at step {step} is not a multiple of seq_len {seq_len}"
                )
            return tokens // seq_len

        return rows
    if callable(batch_size):
        return batch_size
    raise ValueError(
        f"batch_size must be an int, a callable step -> rows or a BatchSizePlan, got {batch_size!r}"
    )


class TrainIterator(grain.DatasetIterator):
    """Batches of the training pipeline with an exact, JSON-serializable state; see the module docstring.

    Raises (from `__next__`):
      ValueError: a global batch size not divisible by process_count, or a stage whose components run
        out of documents (finite `epochs`) before its token boundary.
    """

    def __init__(
        self,
        pipeline: PipelineSpec,
        tokenizer,
        *,
        seq_len: int,
        batch_size: Any,
        process_index: int,
        process_count: int,
        seed: int,
        planned_tokens: int = 0,
    ):
        super().__init__()
        if not 0 <= process_index < process_count:
            raise ValueError(f"process_index {process_index} not in [0, process_count={process_count})")
        if seq_len < 1:
            raise ValueError(f"seq_len must be positive, got {seq_len}")
        self.pipeline = pipeline
        self.tokenizer, self.seq_len, self.seed = tokenizer, seq_len, seed
        self.process_index, self.process_count = process_index, process_count
        self._rows_at = _batch_rule(batch_size, seq_len)
        self.component_names = list(pipeline.components)
        self.components = [spec.load(name, tokenizer) for name, spec in pipeline.components.items()]
        self.stage_ends = [
            None if s.until_tokens is None else math.ceil(s.until_tokens / (seq_len * process_count))
            for s in pipeline.stages
        ]
        self.fingerprint = hashlib.sha256(
            json.dumps(
                [pipeline.to_dict(), seq_len, seed, tokenizer.checksum, process_index, process_count],
                sort_keys=True,
            ).encode()
        ).hexdigest()[:16]
        mixed = pipeline.mixed()
        self._host_document_counts = {
            name: len(
                mixture.host_documents(
                    self.components[self.component_names.index(name)],
                    spec,
                    split_seed=pipeline.split_seed,
                    process_index=process_index,
                    process_count=process_count,
                )
            )
            for name, spec in mixed.items()
        }
        self._injected = [
            (self.component_names.index(name), spec) for name, spec in pipeline.injected().items()
        ]
        self._schedule, self._stage0_documents = None, 0  # injected occurrences (first stage only)
        if self._injected:
            weights = pipeline.stages[0].weights
            lengths = [self.components[self.component_names.index(name)].mean_tokens for name in weights]
            self._schedule = injection.make_schedule(
                self._injected,
                mixture_mean_tokens=sum(weights.values())
                / sum(w / m for w, m in zip(weights.values(), lengths)),
                seed=seed,
                process_index=process_index,
                process_count=process_count,
            )
        self.step, self.rows, self.stage = 0, 0, 0
        self._tokens_before_stage = [0] * len(self.components)  # target tokens of finished stages
        self.length_buckets: dict[str, dict] = {}  # of the current stage's bucketed components
        self._packer = self._stage_packer(0)
        self._passes_logged = self._passes()  # the passes each component has begun, as last logged
        if process_index == 0 and planned_tokens:
            for name, passes in self.planned_passes(planned_tokens).items():
                logging.info(
                    "data: %s, %d documents of ~%.0f tokens per data shard: the %s tokens planned read it %.2f "
                    "times%s",
                    name,
                    self._host_document_counts[name],
                    self.components[self.component_names.index(name)].mean_tokens,
                    f"{planned_tokens:,}",
                    passes,
                    f" (repeated: epochs={self.pipeline.components[name].epochs})" if passes > 1 else "",
                )

    def planned_passes(self, planned_tokens: int) -> dict[str, float]:
        """How many times the first `planned_tokens` tokens of the run (all shards) read each mixed component's
        documents of this data shard, from the stages' token shares and the components' mean document lengths
        (an estimate: a mean, and rows end where documents do not)."""
        passes = dict.fromkeys(self._host_document_counts, 0.0)
        start = 0
        for stage in self.pipeline.stages:
            end = planned_tokens if stage.until_tokens is None else min(stage.until_tokens, planned_tokens)
            if end > start:
                total = sum(stage.weights.values())
                for name, weight in stage.weights.items():
                    if name in passes:
                        component = self.components[self.component_names.index(name)]
                        shard_tokens = self._host_document_counts[name] * component.mean_tokens
                        passes[name] += (end - start) * weight / total / self.process_count / shard_tokens
            start = max(start, end)
        return passes

    def _passes(self) -> dict[str, int]:
        """The passes over its documents each mixed component of the current stage has begun on this shard."""
        started = self._packer.documents_started
        stage = self.pipeline.stages[self.stage]
        return {
            name: math.ceil(started[self.component_names.index(name)] / count)
            for name, count in self._host_document_counts.items()
            if name in stage.weights
        }

    def _log_new_passes(self) -> None:
        """One line (first data shard) for each component that began another pass over its documents."""
        passes = self._passes()
        for name, begun in passes.items():
            if begun > max(self._passes_logged.get(name, 1), 1) and self.process_index == 0:
                logging.info(
                    "data: %s begins pass %d over its %d documents per data shard at step %d (stage %s; "
                    "epochs=%s)",
                    name,
                    begun,
                    self._host_document_counts[name],
                    self.step,
                    self.pipeline.stages[self.stage].name,
                    self.pipeline.components[name].epochs,
                )
        self._passes_logged = passes

    def _stage_packer(self, stage_index: int) -> PackedRows:
        stage = self.pipeline.stages[stage_index]
        self.length_buckets = {}
        stage_seed = stage.seed if stage.seed is not None else mixture.derive_seed(self.seed, stage_index)
        datasets, weights, lengths = [], [], []
        for name, weight in stage.weights.items():
            index = self.component_names.index(name)
            component = self.components[index]
            spec = self.pipeline.components[name]
            host = dict(
                seed=mixture.derive_seed(stage_seed, name),
                split_seed=self.pipeline.split_seed,
                process_index=self.process_index,
                process_count=self.process_count,
            )
            if spec.length_buckets is None:
                datasets.append(mixture.component_dataset(component, index, spec, **host))
                lengths.append(component.mean_tokens)
            else:
                dataset, mean_tokens, counts = mixture.bucketed_component_dataset(
                    component, index, spec, **host
                )
                datasets.append(dataset)
                lengths.append(mean_tokens)
                self.length_buckets[name] = {
                    "edges": list(spec.length_buckets.edges),
                    "token_shares": list(spec.length_buckets.token_shares),
                    "host_documents": counts,
                }
            weights.append(weight)
        stream = mixture.mix_components(datasets, weights, lengths)
        if stage_index == 0 and self._injected:
            stream = injection.InjectedStream(stream, self._schedule)
        return PackedRows(stream, [c.documents for c in self.components], self.seq_len, self.tokenizer.pad_id)

    def _next_row(self) -> tuple[np.ndarray, np.ndarray] | None:
        end = self.stage_ends[self.stage]
        if end is not None and self.rows >= end:
            self._tokens_before_stage = self.tokens_consumed()
            if self.stage == 0:
                self._stage0_documents = self._packer.get_state()["next_new_document"]
            self.stage += 1
            self._packer = self._stage_packer(self.stage)
            return self._next_row()
        try:
            row = next(self._packer)
        except StopIteration:
            if end is not None:
                stage = self.pipeline.stages[self.stage]
                raise ValueError(
                    f"stage {stage.name!r} ran out of documents after {self.rows} rows per host, before its "
                    f"boundary at {end} rows ({stage.until_tokens} tokens): "
                    "raise the components' 'epochs' (None repeats forever) or lower 'until_tokens'"
                ) from None
            return None
        self.rows += 1
        return row, self._packer.history(max(self.pipeline.goldfish.h - 1, 0))

    def __next__(self) -> dict[str, np.ndarray]:
        global_rows = self._rows_at(self.step)
        if global_rows % self.process_count:
            raise ValueError(
                f"global batch of {global_rows} rows at step {self.step} is not divisible by "
                f"process_count {self.process_count}"
            )
        rows, histories = [], []
        for _ in range(global_rows // self.process_count):
            packed = self._next_row()
            if packed is None:
                break
            rows.append(packed[0])
            histories.append(packed[1])
        if not rows:
            raise StopIteration
        # The last batch of a finite stream is filled with padding rows (never targets).
        while len(rows) < global_rows // self.process_count:
            rows.append(np.full(self.seq_len + 1, self.tokenizer.pad_id, np.int32))
            histories.append(np.full_like(histories[0], -1))
        self.step += 1
        self._log_new_passes()
        return rows_to_batch(np.stack(rows), self.tokenizer, self.pipeline.goldfish, np.stack(histories))

    @property
    def packer(self) -> PackedRows:
        """The current stage's packer: its `stream` of `(component, document)` pairs and its position."""
        return self._packer

    def get_state(self) -> dict[str, Any]:
        """JSON-serializable state (see the module docstring)."""
        return {
            "version": STATE_VERSION,
            "fingerprint": self.fingerprint,
            "step": self.step,
            "rows": self.rows,
            "stage": self.stage,
            "packer": self._packer.get_state(),
            "tokens_before_stage": list(self._tokens_before_stage),
            "stage0_documents": self._stage0_documents,
            "length_buckets": self.length_buckets,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Continues from `get_state()` of a pipeline built with the same config and layout.

        Raises:
          ValueError: the state is from another version or another pipeline (config, seq_len, seed,
            tokenizer or process layout differ).
        """
        if state.get("version") != STATE_VERSION:
            raise ValueError(
                f"data iterator state version {state.get('version')} != {STATE_VERSION}: the checkpoint was "
                "written by another apertus_jax version; resume it with that version or start a new --workdir"
            )
        if state["fingerprint"] != self.fingerprint:
            raise ValueError(
                "data iterator state was saved by a different pipeline (data config, seq_len, seed, "
                "tokenizer or process_index/process_count differ); restore with the same settings"
            )
        self.step, self.rows, self.stage = int(state["step"]), int(state["rows"]), int(state["stage"])
        self._stage0_documents = int(state.get("stage0_documents", 0))
        self._packer = self._stage_packer(self.stage)
        self._packer.set_state(state["packer"])
        self._tokens_before_stage = [
            int(n) for n in state.get("tokens_before_stage", [0] * len(self.components))
        ]
        self._passes_logged = self._passes()

    def tokens_consumed(self) -> list[int]:
        """Per component (in `component_names` order), the tokens this host has yielded as targets so far,
        over all stages (padding excluded): their sum is rows * seq_len minus the padded targets."""
        return [a + b for a, b in zip(self._tokens_before_stage, self._packer.tokens_consumed)]

    def consumed(self) -> dict[str, dict[str, Any]]:
        """What the batches yielded so far hold, per component: `{"tokens": {name: target tokens},
        "exposures": {injected name: [occurrences started, per document]}}` (sums over shards add up)."""
        exposures = {}
        if self._injected:
            started = (
                self._packer.get_state()["next_new_document"] if self.stage == 0 else self._stage0_documents
            )
            counts = injection.exposures(self._schedule, started)
            for index, spec in self._injected:
                seen = [0] * len(spec.planned_repetitions())
                for document, count in counts.get(index, {}).items():
                    seen[document] = count
                exposures[self.component_names[index]] = seen
        return {"tokens": dict(zip(self.component_names, self.tokens_consumed())), "exposures": exposures}

    def stats(self) -> dict[str, Any]:
        """Progress for logging: step, stage, rows and tokens on this host, and per component the
        documents started in the current stage and the epochs they make on this host."""
        counts = self._packer.documents_started
        per_component = {}
        stage = self.pipeline.stages[self.stage]
        for index, name in enumerate(self.component_names):
            if name in stage.weights:
                per_component[name] = {
                    "documents": counts[index],
                    "epochs": counts[index] / self._host_document_counts[name],
                }
        return {
            "step": self.step,
            "stage": stage.name,
            "rows": self.rows,
            "tokens": self.rows * self.seq_len,
            "components": per_component,
            "length_buckets": self.length_buckets,
        }


def pipeline_source(
    data: DataConfig,
    tokenizer,
    batch_size,
    seed: int,
    process_index: int,
    process_count: int,
    planned_tokens: int = 0,
) -> ShardedSource:
    """A run's default batch source: its `data.pipeline` read by `TrainIterator` shards, this process's block
    of them (`apertus_jax.data.process_shards.sharded`); `batch_size` as `TrainIterator` takes it (the run's
    `BatchSizePlan`). With Goldfish (k > 0) each batch's `goldfish_dropped_fraction` is a batch metric. With
    `planned_tokens` (the run's), the first data shard logs how many times they read each component.

    Raises:
      ValueError / FileNotFoundError: bad data (a missing path, an empty source, a stage out of documents).
    """

    def build(shard: int, num_shards: int) -> TrainIterator:
        return TrainIterator(
            data.pipeline,
            tokenizer,
            seq_len=data.seq_len,
            batch_size=batch_size,
            process_index=shard,
            process_count=num_shards,
            seed=seed,
            planned_tokens=planned_tokens,
        )

    goldfish = lambda batch: {"goldfish_dropped_fraction": dropped_fraction(batch, tokenizer.eod_id)}
    metrics = goldfish if data.pipeline.goldfish.k else None
    return sharded(build, data, process_index, process_count, metrics)
