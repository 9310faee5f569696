"""The trainer's front door: a typed run config and its plug-ins become the run's objects here, and only here.

    run = Run(config, objective=..., batch_source=..., hooks=[...])   # checks the layout; mesh, optimizer
    run.tokenizer, run.batch_source()       # the data side (built on first use)
    run.spec                                # train-state shapes and shardings, the sharded initializer
    run.flops_per_token                     # model FLOPs of one trained token (MFU)
    step = run.train_step(rows)             # THE jitted train step for batches of `rows` rows
    apertus_jax.train.loop.train(run, workdir)

Plug-ins: the objective (`apertus_jax.train.step.Objective`; default the pretraining cross-entropy), the batch
source (`apertus_jax.train.batches`; default the data pipeline) and hooks (`apertus_jax.train.hooks`). Jobs
(`apertus_jax.jobs`) choose them; nothing here knows a job.

The training loop, evaluation, the memory plan, the train-step benchmark and the Goldfish study all take their
step from `Run.train_step`, so a memory plan compiles exactly the program the loop runs (same shardings,
microbatches and donation), and a benchmark times it.
"""

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from absl import logging

from apertus_jax.data.config import BATCH_KEYS, DataConfig
from apertus_jax.models import flops, partitioning
from apertus_jax.models.config import ModelConfig
from apertus_jax.models.partitioning import MeshConfig
from apertus_jax.models.transformer import param_logical_axes
from apertus_jax.named import load_named
from apertus_jax.optim.config import OptimConfig, make_lr_schedule, make_run_optimizer
from apertus_jax.train.batches import BatchSource
from apertus_jax.train.checkpoint import InitialParams, workdir_params
from apertus_jax.train.config import RunConfig, TrainConfig, check_layout
from apertus_jax.train.hooks import Hook
from apertus_jax.train.loss import cross_entropy
from apertus_jax.train.step import FrozenParams, Objective, make_train_step
from apertus_jax.train.train_state import AbstractTrainState, batch_sharding, make_abstract_train_state

# The default data side of a run, imported on first use: a run that brings its own batch source (post-training,
# studies, benchmarks) never loads the data pipeline, and importing the trainer loads neither.
RUN_TOKENIZER = "apertus_jax.data.run_tokenizer:run_tokenizer"
PIPELINE_SOURCE = "apertus_jax.data.pipeline:pipeline_source"


@dataclasses.dataclass(frozen=True)
class TrainStep:
    """The jitted `fn(params, opt_state, batch, frozen) -> (params, opt_state, metrics)` for `rows`-row batches
    (`frozen`: the objective's frozen parameters, `Run.load_frozen()`; None without them).

    `params` and `opt_state` are donated; `in_shardings` / `out_shardings` are exactly those given to
    `jax.jit`; `num_microbatches` sequential microbatches of `rows // num_microbatches` rows make one step.
    """

    fn: Callable
    rows: int
    num_microbatches: int
    in_shardings: tuple
    out_shardings: tuple


class Run:
    """A typed run config and the objects built from it: the trainer's front door.

    Args:
      config: the run's typed sections (`apertus_jax.train.config.RunConfig`).
      objective: the loss (`apertus_jax.train.step.Objective`); None is the pretraining cross-entropy
        (`apertus_jax.train.loss.cross_entropy` with `train.z_loss_weight` and `train.loss_chunk_tokens`).
      batch_source: `(run) -> BatchSource` (`apertus_jax.train.batches`), called once by the loop; None reads
        `data.pipeline` (`apertus_jax.data.pipeline.pipeline_source`).
      hooks: the loop's plug-ins (`apertus_jax.train.hooks.Hook`), called in this order.
      init_params: `(run) -> InitialParams` (`apertus_jax.train.checkpoint`), the parameters a fresh run starts
        from instead of a random initialization; None reads `checkpoint.init_from` as a training workdir
        (`workdir_params`) when it is set. A job gives its own for other sources (a HF checkpoint:
        `apertus_jax.jobs.pretrain.assemble`).
      devices: the devices of the mesh (default: all); the memory plan passes virtual CPU devices.

    Raises:
      ValueError: a config the devices or processes cannot run (one line naming the field; `check_layout`).
    """

    def __init__(
        self,
        config: RunConfig,
        *,
        objective: Objective | None = None,
        batch_source: Callable[["Run"], BatchSource] | None = None,
        hooks: Sequence[Hook] = (),
        init_params: Callable[["Run"], InitialParams] | None = None,
        devices: Sequence | None = None,
    ):
        devices = list(jax.devices() if devices is None else devices)
        self.config = config
        self.objective = objective or cross_entropy(
            config.train.z_loss_weight, config.train.loss_chunk_tokens
        )
        self.hooks = tuple(hooks)
        self._batch_source = batch_source or pipeline_batch_source
        self._init_params = init_params
        self.mesh_shape = check_layout(config, len(devices), jax.process_count())
        data, fsdp, tensor, context = self.mesh_shape
        self.mesh = partitioning.make_mesh(data, fsdp, tensor, devices, context)
        self.flops_per_token = flops.train_flops_per_token(config.model, config.data.seq_len)
        logical_axes = param_logical_axes(config.model)
        self.plan = config.train.plan
        self.lr_schedule = make_lr_schedule(config.optim, self.plan)
        train = config.train
        self.optimizer = make_run_optimizer(
            config.optim,
            self.lr_schedule,
            logical_axes,
            spike_factor=train.spike_factor,
            spike_warmup_steps=train.spike_warmup_steps,
            spike_ema_decay=train.spike_ema_decay,
        )
        self.tx = self.optimizer.tx
        self._steps: dict[int, TrainStep] = {}

    @functools.cached_property
    def tokenizer(self):
        """The run's tokenizer (`data.tokenizer`; an `apertus_jax.tokenizers.base.Tokenizer`), checked against
        the model's vocabulary.

        Raises:
          ValueError / FileNotFoundError: an unknown spec, a missing file, more ids than `model.vocab_size`.
        """
        data = self.config.data
        tokenizer = load_named(RUN_TOKENIZER)(data.tokenizer, data.demo_tokenizer_vocab)
        if tokenizer.vocab_size > self.config.model.vocab_size:
            raise ValueError(
                f"tokenizer {tokenizer.name} has {tokenizer.vocab_size} ids but model.vocab_size is "
                f"{self.config.model.vocab_size}; set --config.model.vocab_size >= {tokenizer.vocab_size}"
            )
        return tokenizer

    def batch_source(self) -> BatchSource:
        """This process's batch source (the `batch_source` plug-in, default the data pipeline).

        Raises:
          ValueError / FileNotFoundError: bad data config or a missing data path.
        """
        return self._batch_source(self)

    def initial_params(self) -> InitialParams | None:
        """Where a fresh run's parameters come from (the `init_params` plug-in, else `checkpoint.init_from` as a
        workdir); None: a random initialization."""
        if self._init_params is not None:
            return self._init_params(self)
        source = self.config.checkpoint.init_from
        return workdir_params(source) if source else None

    @functools.cached_property
    def spec(self) -> AbstractTrainState:
        """Abstract train state on the run's mesh, its shardings and the sharded initializer."""
        return make_abstract_train_state(self.config.model, self.tx, self.mesh, self.config.seed)

    @functools.cached_property
    def frozen(self) -> FrozenParams | None:
        """The objective's frozen parameters on the run's mesh (abstract; `load_frozen` gives the arrays)."""
        return self.objective.frozen(self) if self.objective.frozen else None

    def load_frozen(self):
        """The objective's frozen parameters as arrays (None without them): the step's last argument."""
        return self.frozen.load() if self.frozen else None

    def num_microbatches(self, rows: int) -> int:
        """Microbatches of a `rows`-row batch: rows / train.microbatch_size (1 when it is 0)."""
        return rows // (self.config.train.microbatch_size or rows)

    def train_step(self, rows: int) -> TrainStep:
        """The jitted train step for `rows`-row batches (built once per row count)."""
        if rows not in self._steps:
            shardings = self.spec.shardings
            frozen = jax.tree.map(lambda x: x.sharding, self.frozen.abstract) if self.frozen else None
            in_shardings = (shardings["params"], shardings["opt_state"], batch_sharding(self.mesh), frozen)
            out_shardings = (shardings["params"], shardings["opt_state"], None)
            micro = self.num_microbatches(rows)
            fn = jax.jit(
                make_train_step(
                    self.spec,
                    self.tx,
                    self.objective,
                    micro,
                    self.config.optim.clip_norm,
                    self.optimizer.dropped,
                ),
                in_shardings=in_shardings,
                out_shardings=out_shardings,
                donate_argnums=(0, 1),
            )
            self._steps[rows] = TrainStep(fn, rows, micro, in_shardings, out_shardings)
        return self._steps[rows]

    def abstract_batch(self, rows: int) -> dict[str, jax.ShapeDtypeStruct]:
        """The global batch of `rows` rows as int32 `[rows, seq_len]` ShapeDtypeStructs on the batch sharding,
        plus the objective's `batch_arrays` (`[rows, *shape]`)."""
        shape = (rows, self.config.data.seq_len)
        sharding = batch_sharding(self.mesh)
        batch = {key: jax.ShapeDtypeStruct(shape, np.int32, sharding=sharding) for key in BATCH_KEYS}
        for key, (trailing, dtype) in self.objective.batch_arrays.items():
            batch[key] = jax.ShapeDtypeStruct((rows, *trailing), np.dtype(dtype), sharding=sharding)
        return batch

    def lower_train_step(self, rows: int) -> jax.stages.Lowered:
        """The train step for `rows`-row batches lowered on abstract arguments (nothing allocated), traced
        under the mesh like the loop runs it."""
        abstract = self.spec.abstract
        with jax.set_mesh(self.mesh):
            return self.train_step(rows).fn.lower(
                abstract["params"],
                abstract["opt_state"],
                self.abstract_batch(rows),
                self.frozen.abstract if self.frozen else None,
            )

    def warn_if_steps_end_before_cooldown(self) -> None:
        """Logs a warning when `train.steps` ends before the LR schedule's `optim.total_tokens`."""
        end_tokens = self.plan.tokens_at_step(self.config.train.steps)
        if end_tokens < self.config.optim.total_tokens:
            logging.warning(
                "train.steps=%d ends at %d tokens but the LR schedule runs to optim.total_tokens=%d: the "
                "run stops before the cooldown; set optim.total_tokens (and decay_tokens) to match",
                self.config.train.steps,
                end_tokens,
                self.config.optim.total_tokens,
            )


def pipeline_batch_source(run: Run) -> BatchSource:
    """The default batch source of `run`: its `data.pipeline`, this process's shards of it (a plug-in that adds
    to the pipeline's batches wraps this one)."""
    pipeline_source = load_named(PIPELINE_SOURCE)
    config = run.config
    return pipeline_source(
        config.data,
        run.tokenizer,
        run.plan,
        config.seed,
        jax.process_index(),
        jax.process_count(),
        run.plan.tokens_at_step(config.train.steps),
    )


def run_config_for(
    model: ModelConfig,
    *,
    seq_len: int,
    rows: int,
    steps: int,
    optim: dict[str, Any],
    seed: int = 0,
    mesh: dict[str, int] | None = None,
) -> RunConfig:
    """A run config for jobs that feed their own batches (benchmarks, studies): `model`, one batch-size
    phase of `rows` x `seq_len` tokens, `optim` field overrides, the given mesh sizes (default data=-1).

    Raises:
      ValueError: an unknown optim or mesh field, or a value out of range (one line).
    """
    optim_fields = {f.name for f in dataclasses.fields(OptimConfig)}
    unknown = sorted(set(optim) - optim_fields)
    if unknown:
        raise ValueError(f"optim: unknown fields {unknown}")
    return RunConfig(
        seed=seed,
        model=model,
        data=DataConfig(seq_len=seq_len),
        train=TrainConfig(steps=steps, batch_plan=((0, rows * seq_len),)),
        optim=OptimConfig(**optim),
        mesh=MeshConfig(**(mesh or {})),
    )
