"""One assembly of a run: a run config becomes the run's objects here, and only here.

    run = Run(config)                       # validates every section; builds the mesh and the optimizer
    run.tokenizer, run.data_iterator()      # the data side (built on first use)
    run.spec                                # train-state shapes and shardings, the sharded initializer
    step = run.train_step(rows)             # THE jitted train step for batches of `rows` rows

The training loop, evaluation, the memory plan, the train-step benchmark and the Goldfish study all take their
step from `Run.train_step`, so a memory plan compiles exactly the program the loop runs (same shardings,
microbatches and donation), and a benchmark times it.
"""

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import ml_collections
import numpy as np
from absl import logging

from apertus_jax.data.pipeline import BATCH_KEYS
from apertus_jax.models import partitioning
from apertus_jax.optim.config import make_lr_schedule, make_tx
from apertus_jax.optim.spikes import skip_spikes
from apertus_jax.posttrain.objectives import PREFERENCE_KEYS, SLOTS, loss_for
from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.train import config as config_lib
from apertus_jax.train import inputs
from apertus_jax.train.sharding import batch_sharding
from apertus_jax.train.step import make_train_step
from apertus_jax.train.train_state import TrainStateSpec, make_train_state_spec


@dataclasses.dataclass(frozen=True)
class TrainStep:
    """The jitted `fn(params, opt_state, batch) -> (params, opt_state, metrics)` for `rows`-row batches.

    `params` and `opt_state` are donated; `in_shardings` / `out_shardings` are exactly those given to
    `jax.jit`; `num_microbatches` sequential microbatches of `rows // num_microbatches` rows make one step.
    """

    fn: Callable
    rows: int
    num_microbatches: int
    in_shardings: tuple
    out_shardings: tuple


class Run:
    """A validated run config and the objects built from it.

    Args:
      config: a run config (`apertus_jax.train.config.base_config()` schema).
      devices: the devices of the mesh (default: all); the memory plan passes virtual CPU devices.

    Raises:
      ValueError: a config that fails validation (one line naming the field); see `config.sections`.
    """

    def __init__(self, config: ml_collections.ConfigDict, devices: Sequence | None = None):
        devices = list(jax.devices() if devices is None else devices)
        self.config = config
        self.sections = config_lib.sections(config, len(devices), jax.process_count())
        self.model_config = self.sections.model
        self.plan = self.sections.train.plan
        self.lr_schedule = make_lr_schedule(self.sections.optim, self.plan)
        self.tx = make_tx(self.sections.optim, self.lr_schedule)
        train = self.sections.train
        if train.spike_factor:
            self.tx = skip_spikes(
                self.tx, train.spike_factor, train.spike_warmup_steps, train.spike_ema_decay
            )
        data, fsdp, tensor, context = self.sections.mesh_shape
        self.mesh = partitioning.make_mesh(data, fsdp, tensor, devices, context)
        self._steps: dict[int, TrainStep] = {}

    @functools.cached_property
    def tokenizer(self) -> Tokenizer:
        """The run's tokenizer (`data.tokenizer`), checked against the model's vocabulary.

        Raises:
          ValueError / FileNotFoundError: an unknown spec, a missing file, more ids than `model.vocab_size`.
        """
        tokenizer = inputs.load_run_tokenizer(self.config.data)
        if tokenizer.vocab_size > self.model_config.vocab_size:
            raise ValueError(
                f"tokenizer {tokenizer.name} has {tokenizer.vocab_size} ids but model.vocab_size is "
                f"{self.model_config.vocab_size}; set --config.model.vocab_size >= {tokenizer.vocab_size}"
            )
        return tokenizer

    def data_iterator(self) -> inputs.ShardedIterator:
        """This process's batch iterator over the configured pipeline (Grain-checkpointable).

        Raises:
          ValueError / FileNotFoundError: bad pipeline config or a missing data path.
        """
        return inputs.make_train_iterator(self.config, self.tokenizer, self.plan)

    @functools.cached_property
    def spec(self) -> TrainStateSpec:
        """Abstract train state on the run's mesh, its shardings and the sharded initializer."""
        return make_train_state_spec(self.model_config, self.tx, self.mesh, self.sections.seed)

    def num_microbatches(self, rows: int) -> int:
        """Microbatches of a `rows`-row batch: rows / train.microbatch_size (1 when it is 0)."""
        return rows // (self.sections.train.microbatch_size or rows)

    def train_step(self, rows: int) -> TrainStep:
        """The jitted train step for `rows`-row batches (built once per row count)."""
        if rows not in self._steps:
            shardings = self.spec.shardings
            in_shardings = (shardings["params"], shardings["opt_state"], batch_sharding(self.mesh))
            out_shardings = (shardings["params"], shardings["opt_state"], None)
            micro = self.num_microbatches(rows)
            loss_fn = loss_for(self.sections.posttrain)  # None: the pretraining loss (posttrain.objective)
            fn = jax.jit(
                make_train_step(
                    self.spec.apply_fn,
                    self.tx,
                    micro,
                    hidden_fn=self.spec.hidden_fn,
                    z_loss_weight=self.sections.train.z_loss_weight,
                    clip_norm=self.sections.optim.clip_norm,
                    chunk_tokens=self.sections.train.loss_chunk_tokens,
                    **({"loss_fn": loss_fn} if loss_fn else {}),
                ),
                in_shardings=in_shardings,
                out_shardings=out_shardings,
                donate_argnums=(0, 1),
            )
            self._steps[rows] = TrainStep(fn, rows, micro, in_shardings, out_shardings)
        return self._steps[rows]

    def abstract_batch(self, rows: int) -> dict[str, jax.ShapeDtypeStruct]:
        """The global batch of `rows` rows as int32 `[rows, seq_len]` ShapeDtypeStructs on the batch sharding
        (QRPO/DPO: plus float32 `[rows, 2]` `ref_logprobs` and `quantile_reward`)."""
        shape = (rows, self.sections.data.seq_len)
        sharding = batch_sharding(self.mesh)
        batch = {key: jax.ShapeDtypeStruct(shape, np.int32, sharding=sharding) for key in BATCH_KEYS}
        if self.sections.posttrain.objective != "lm":  # QRPO/DPO rows carry per-completion floats
            for key in PREFERENCE_KEYS:
                batch[key] = jax.ShapeDtypeStruct((rows, SLOTS), np.float32, sharding=sharding)
        return batch

    def lower_train_step(self, rows: int) -> jax.stages.Lowered:
        """The train step for `rows`-row batches lowered on abstract arguments (nothing allocated), traced
        under the mesh like the loop runs it."""
        abstract = self.spec.abstract
        with jax.set_mesh(self.mesh):
            return self.train_step(rows).fn.lower(
                abstract["params"], abstract["opt_state"], self.abstract_batch(rows)
            )

    def warn_if_steps_end_before_cooldown(self) -> None:
        """Logs a warning when `train.steps` ends before the LR schedule's `optim.total_tokens`."""
        end_tokens = self.plan.tokens_at_step(self.sections.train.steps)
        if end_tokens < self.sections.optim.total_tokens:
            logging.warning(
                "train.steps=%d ends at %d tokens but the LR schedule runs to optim.total_tokens=%d: the "
                "run stops before the cooldown; set --config.optim.total_tokens (and decay_tokens) to match",
                self.sections.train.steps,
                end_tokens,
                self.sections.optim.total_tokens,
            )


def step_config(
    model: dict[str, Any],
    *,
    seq_len: int,
    rows: int,
    steps: int,
    optim: dict[str, Any],
    seed: int = 0,
    mesh: dict[str, int] | None = None,
) -> ml_collections.ConfigDict:
    """A run config for jobs that feed their own batches (benchmarks, studies): `model` section, one
    batch-size phase of `rows` x `seq_len` tokens, `optim` overrides, the given mesh (default data=-1).

    Raises:
      ValueError: as `config.sections` (e.g. an unknown optim field).
    """
    config = config_lib.base_config()
    config.seed = seed
    config.model = model
    config.data.seq_len = seq_len
    config.train.steps = steps
    config.train.batch_plan = ((0, rows * seq_len),)
    for name, value in optim.items():
        if name not in config.optim:
            raise ValueError(f"optim: unknown field {name!r}")
        config.optim[name] = value
    for name, value in (mesh or {}).items():
        config.mesh[name] = value
    return config
