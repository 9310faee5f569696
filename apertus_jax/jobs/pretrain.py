"""Training a parsed config: the hooks every job's run gets, and the pretraining job.

    status = pretrain(parse(config_dict), workdir)      # "done" | "preempted"

`assemble` builds the trainer's `Run` from a `Config` with the standard hooks (the config record, the
provenance record, the loss curve, in-loop evaluation when `eval.every_steps` > 0, the probe manifest of a run
that reads `data.pipeline`, written when it injects documents), the HF checkpoint of `checkpoint.init_from =
"hf:DIR"` as its initial parameters, and a job's own objective, batch source and hooks; `run_training` runs
the loop on it. Post-training (`apertus_jax.jobs.posttrain`), the long-context stages and the studies
call it with their plug-ins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from absl import logging

from apertus_jax.config.schema import Config
from apertus_jax.eval.in_loop import InLoopEvaluation
from apertus_jax.logs import counted
from apertus_jax.models import flops, hf
from apertus_jax.records.config_record import ConfigRecord
from apertus_jax.records.loss_plot import LossPlot
from apertus_jax.records.probe_manifest import ProbeManifest
from apertus_jax.records.provenance import ProvenanceRecord
from apertus_jax.train import loop
from apertus_jax.train.batches import BatchSource
from apertus_jax.train.checkpoint import InitialParams
from apertus_jax.train.hooks import Hook
from apertus_jax.train.run import Run
from apertus_jax.train.step import Objective

# The fix a job driving several runs gives when one was preempted (it stops there; the next call resumes).
RERUN = "rerun the command to continue"
# `checkpoint.init_from = "hf:DIR"`: a HF checkpoint's parameters start the run (continued pretraining).
HF_PREFIX = "hf:"


def hf_params(directory: str) -> Callable[[Run], InitialParams]:
    """The `init_params` plug-in of a HF checkpoint folder: checked against the run's model and tokenizer
    (`apertus_jax.models.hf.check_init_dir`), read onto the run's mesh shard by shard (`read_params`)."""

    def initial_params(run: Run) -> InitialParams:
        model = run.config.model
        return InitialParams(
            check=lambda: hf.check_init_dir(directory, model, run.tokenizer),
            load=lambda abstract: (
                hf.read_params(directory, model, abstract),
                f"the HF checkpoint {directory}",
            ),
        )

    return initial_params


def standard_hooks(
    config: Config, data: dict[str, dict] | None = None, loss_plot: LossPlot | None = None
) -> list[Hook]:
    """The hooks of every run of `config` (module docstring), in the order they run.

    Args:
      data: {name: description} of what a job's own batch source reads; None: the run reads `data.pipeline`
        (its components describe themselves, and the probe manifest lists its injected documents).
      loss_plot: the loss curve of a job whose objective is not the training cross-entropy, labelled with
        what its loss is (None: `LossPlot()`).
    """
    pipeline = config.data.pipeline
    described = (
        data if data is not None else {name: spec.describe() for name, spec in pipeline.components.items()}
    )
    hooks: list[Hook] = [ConfigRecord(config.to_dict()), ProvenanceRecord(described), loss_plot or LossPlot()]
    # The held-out sets of data.pipeline only when the run reads it: no own description, or one that names
    # every component of the pipeline (a source that adds to the pipeline's batches, e.g. teacher logits).
    reads_pipeline = data is None or set(pipeline.components) <= set(data)
    if config.eval.every_steps:
        hooks.append(InLoopEvaluation(config.eval, pipeline if reads_pipeline else None))
    if data is None:
        hooks.append(ProbeManifest())
    return hooks


def assemble(
    config: Config,
    *,
    objective: Objective | None = None,
    batch_source: Callable[[Run], BatchSource] | None = None,
    data: dict[str, dict] | None = None,
    loss_plot: LossPlot | None = None,
    hooks: Sequence[Hook] = (),
    devices: Sequence | None = None,
) -> Run:
    """The `Run` of `config` with the standard hooks followed by `hooks`, starting from the HF checkpoint of
    `checkpoint.init_from = "hf:DIR"` when it names one (`hf_params`).

    Args:
      batch_source, data: a job's own batch source and the description of what it reads (both or neither;
        without them the run reads `data.pipeline`).
      loss_plot: as `standard_hooks`.

    Raises:
      ValueError: a batch source without its description, or a config the devices or processes cannot run
        (`apertus_jax.train.config.check_layout`); FileNotFoundError / ValueError: a missing or unreadable
        data file (`apertus_jax.data.config.PipelineSpec.check_inputs`).
    """
    if (batch_source is None) != (data is None):
        raise ValueError("a job's own batch source needs the description of what it reads (data=...)")
    hooks = [*standard_hooks(config, data, loss_plot), *hooks]
    init_from = config.checkpoint.init_from
    init_params = hf_params(init_from[len(HF_PREFIX) :]) if init_from.startswith(HF_PREFIX) else None
    run = Run(
        config,
        objective=objective,
        batch_source=batch_source,
        hooks=hooks,
        init_params=init_params,
        devices=devices,
    )
    if data is None:
        config.data.pipeline.check_inputs()
    return run


def describe(config: Config) -> str:
    """The start-up line of a run: model size, optimizer, LR schedule and the tokens planned."""
    model, optim, plan = config.model, config.optim, config.train.plan
    phases = " then ".join(
        f"{tokens // config.data.seq_len} x {config.data.seq_len} from token {start:,}"
        if start
        else f"{tokens // config.data.seq_len} x {config.data.seq_len}"
        for start, tokens in config.train.batch_plan
    )
    schedule = (
        f"wsd ({optim.decay_shape} cooldown): warmup {optim.warmup_tokens:,}, cooldown {optim.decay_tokens:,}"
        if optim.schedule == "wsd"
        else f"cosine: warmup {optim.warmup_tokens:,}"
    )
    return (
        f"run: model {config.model_preset} ({counted(model.n_layers, 'layer')}, d_model {model.d_model}, vocab "
        f"{model.vocab_size:,}: {flops.param_count(model):,} parameters); optimizer {optim.name} (peak LR "
        f"{optim.peak_lr:g}, weight decay {optim.weight_decay:g}, clip {optim.clip_norm:g}); schedule "
        f"{schedule} of {optim.total_tokens:,} tokens; {config.train.steps:,} steps of {phases} tokens: "
        f"{plan.tokens_at_step(config.train.steps):,} tokens planned"
    )


def run_training(config: Config, workdir: str, **plugins) -> str:
    """Trains (or resumes) `config` in `workdir` with the standard hooks and `plugins` (as `assemble`),
    after logging `describe(config)`; returns "done" or "preempted".

    Raises:
      ValueError / FileNotFoundError / WorkdirLockedError: as `apertus_jax.train.loop.train`.
    """
    startup = describe(config)
    run = assemble(config, **plugins)  # checks the data files first: a missing one is the only line printed
    logging.info(startup)
    return loop.train(run, workdir)


def pretrain(config: Config, workdir: str) -> str:
    """The pretraining job: `config`'s `data.pipeline` with the cross-entropy (and Goldfish) objective.

    Raises:
      ValueError: `posttrain.data` is set (those runs are `apertus_jax.jobs.posttrain`'s); as `run_training`.
    """
    if config.posttrain.data:
        raise ValueError(
            "posttrain.data is set: train it with `python -m experiments.sft` (conversations) or "
            "`python -m experiments.qrpo` (preference records), not experiments.pretrain"
        )
    return run_training(config, workdir)
