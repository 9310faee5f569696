"""The post-training jobs: chat SFT, and QRPO or DPO against a frozen reference (docs/posttrain.md).

    sft(config, workdir)    # posttrain.data: conversation JSONL; posttrain.objective "lm"
    qrpo(config, workdir)   # posttrain.data: preference JSONL; posttrain.objective "qrpo" or "dpo"

Both train the pretraining trainer (`apertus_jax.train`) with post-training plug-ins: a batch source of
packed post-training rows (`apertus_jax.posttrain.sft_data.ChatPipeline`, `preference_data.
PreferencePipeline`) and, for QRPO/DPO, the objective (`apertus_jax.posttrain.objectives.objective_for`). The
policy starts from `checkpoint.init_from`. The reference is `posttrain.reference_workdir` (default
`checkpoint.init_from`); with `posttrain.reference = "cached"` its log-probs of every candidate completion are
scored once, before training, into `posttrain.reference_cache` (default WORKDIR/reference_logprobs.json, kept
on resume), so training holds only the policy; with "on_the_fly" the reference scores every batch.
"""

from __future__ import annotations

import dataclasses
import os

import jax
from absl import logging

from apertus_jax.config.schema import Config
from apertus_jax.data.process_shards import sharded
from apertus_jax.jobs.pretrain import run_training
from apertus_jax.posttrain import epochs
from apertus_jax.posttrain import reference as reference_lib
from apertus_jax.posttrain.objectives import objective_for
from apertus_jax.posttrain.preference_data import PreferencePipeline, completion_examples
from apertus_jax.posttrain.sft_data import ChatPipeline
from apertus_jax.train.run import Run
from apertus_jax.trained.workdir import restore_params


def _shards(run: Run, build):
    """`build(tokenizer, seq_len=, batch_size=, process_index=, process_count=, seed=)` over the run's data
    shards."""
    config = run.config

    def shard(index: int, count: int):
        return build(
            run.tokenizer,
            seq_len=config.data.seq_len,
            batch_size=run.plan,
            process_index=index,
            process_count=count,
            seed=config.seed,
        )

    return sharded(shard, config.data, jax.process_index(), jax.process_count())


def chat_source(paths):
    """The batch-source plug-in of SFT: conversations of `paths`, packed whole, loss on assistant tokens."""
    return lambda run: _shards(run, lambda tokenizer, **kw: ChatPipeline(paths, tokenizer, **kw))


def preference_source(paths, mode: str, make_reference):
    """The batch-source plug-in of QRPO/DPO: rows of the preference records of `paths` with their reference
    log-probs (`make_reference(run, examples) -> (batch, groups) -> float32 [B, 2]`)."""

    def source(run: Run):
        def build(tokenizer, **kw):
            return PreferencePipeline(
                paths,
                tokenizer,
                mode=mode,
                make_reference=lambda examples: make_reference(run, examples),
                **kw,
            )

        return _shards(run, build)

    return source


def posttrain_data(paths, kind: str) -> dict[str, dict]:
    """The provenance description of post-training data: `kind` ("chat" or "preference") JSONL files."""
    return {epochs.COMPONENT: {"kind": kind, "paths": list(paths), "licence": None}}


def reference_workdir(config: Config) -> str:
    """`posttrain.reference_workdir`, else `checkpoint.init_from`.

    Raises:
      ValueError: both are empty.
    """
    workdir = config.posttrain.reference_workdir or config.checkpoint.init_from
    if not workdir:
        raise ValueError(
            "qrpo/dpo need a reference model: set checkpoint.init_from (or posttrain.reference_workdir)"
        )
    return workdir


def reference_model(run: Run, workdir: str) -> tuple[reference_lib.ReferenceModel, int]:
    """The frozen reference (`workdir`'s newest parameters) on the run's mesh and model, and its step.

    Raises:
      FileNotFoundError / ValueError: as `apertus_jax.trained.workdir.restore_params`.
    """
    params, step = restore_params(workdir, run.spec.abstract["params"], "reading the reference from")
    return reference_lib.ReferenceModel(run.spec.apply_fn, params), step


def prepare_reference_cache(config: Config, workdir: str) -> Config:
    """Makes sure `posttrain.reference_cache` (default WORKDIR/reference_logprobs.json) holds the frozen
    reference's log-probs of every candidate completion, scoring them once if it does not (a valid cache of
    the same reference is reused without loading it). Returns `config` with the cache path set.

    Raises:
      ValueError / FileNotFoundError: bad records (one line), a missing reference workdir.
    """
    path = config.posttrain.reference_cache or os.path.join(workdir, "reference_logprobs.json")
    config = dataclasses.replace(
        config, posttrain=dataclasses.replace(config.posttrain, reference_cache=path)
    )
    run = Run(config)
    paths = config.posttrain.data
    examples = completion_examples(paths, run.tokenizer)
    fingerprint = reference_lib.cache_fingerprint(paths, run.tokenizer, config.data.seq_len)
    source = reference_workdir(config)
    try:
        if reference_lib.read_cache(path, fingerprint, len(examples))["reference_workdir"] == source:
            return config
    except (FileNotFoundError, ValueError):
        pass
    model, step = reference_model(run, source)
    with jax.set_mesh(run.mesh):
        logprobs = reference_lib.score_examples(model, examples, config.data.seq_len, run.tokenizer.pad_id)
    reference_lib.write_cache(path, logprobs, fingerprint, source, step)
    logging.info("scored %d completions with the reference %s; cached in %s", len(examples), source, path)
    return config


def sft(config: Config, workdir: str) -> str:
    """Supervised fine-tuning on the conversations of `posttrain.data`; returns "done" or "preempted".

    Raises:
      ValueError: no `posttrain.data`, or an objective other than "lm"; bad records (`PATH:LINE: problem`).
    """
    if not config.posttrain.data or config.posttrain.objective != "lm":
        raise ValueError(
            "experiments.sft trains conversations (posttrain.data) with posttrain.objective='lm'; "
            f"got objective {config.posttrain.objective!r} and data {list(config.posttrain.data)}"
        )
    data = posttrain_data(config.posttrain.data, "chat")
    return run_training(config, workdir, batch_source=chat_source(config.posttrain.data), data=data)


def qrpo(config: Config, workdir: str) -> str:
    """Preference alignment (posttrain.objective "qrpo" or "dpo") on the records of `posttrain.data`: the
    reference log-probs first (cached mode), then training; returns "done" or "preempted".

    Raises:
      ValueError: objective "lm" (that is `sft`), no reference, bad records; FileNotFoundError: a missing
        reference workdir.
    """
    if config.posttrain.objective == "lm":
        raise ValueError(
            "experiments.qrpo trains posttrain.objective 'qrpo' or 'dpo'; use experiments.sft for 'lm'"
        )
    posttrain = config.posttrain
    if posttrain.reference == "cached":
        config = prepare_reference_cache(config, workdir)
        fingerprint_of = lambda run: reference_lib.cache_fingerprint(
            posttrain.data, run.tokenizer, config.data.seq_len
        )

        def make_reference(run, examples):
            cache = reference_lib.read_cache(
                config.posttrain.reference_cache, fingerprint_of(run), len(examples)
            )
            return reference_lib.cached_reference(cache["logprobs"])

    else:
        source, loaded = reference_workdir(config), []

        def make_reference(run, examples):
            if not loaded:  # one reference for all shards of this process
                loaded.append(reference_model(run, source)[0])
            return reference_lib.on_the_fly_reference(loaded[0])

    return run_training(
        config,
        workdir,
        objective=objective_for(posttrain),
        batch_source=preference_source(posttrain.data, posttrain.objective, make_reference),
        data=posttrain_data(posttrain.data, "preference"),
    )
