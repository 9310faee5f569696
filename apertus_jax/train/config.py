"""The trainer's typed configuration: `RunConfig`, its sections, and the rules that span them.

Each package owns its section, its defaults and its range checks: `model` (`apertus_jax.models.config.
ModelConfig`), `data` (`apertus_jax.data.config.DataConfig`, the pipeline typed), `optim`
(`apertus_jax.optim.config.OptimConfig`), `mesh` (`apertus_jax.models.partitioning.MeshConfig`), `profile`
(`apertus_jax.train.metrics.ProfileConfig`); the train package owns `train`, `checkpoint`, `faults` and
`metrics` (below). Every section checks its own fields when it is built; `check_layout` checks the rules that
need the device and process counts (the mesh, batch and shard splits) once, when a `Run` is assembled.

Nothing here reads a config file or a ConfigDict: `apertus_jax.config.schema` parses those into a `RunConfig`
(plus the sections of the jobs above the trainer) once.
"""

import dataclasses
from typing import Any

from apertus_jax.checks import check_number
from apertus_jax.data.config import DataConfig
from apertus_jax.models import presets as model_presets
from apertus_jax.models.config import ModelConfig
from apertus_jax.models.partitioning import MeshConfig
from apertus_jax.optim.batch_plan import BatchSizePlan
from apertus_jax.optim.config import OptimConfig
from apertus_jax.train.metrics import ProfileConfig, check_wandb_config


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The `train` section.

    Attributes:
      steps: optimizer steps of the run (the run stops after step `steps`).
      batch_plan: ((start_tokens, tokens_per_batch), ...): batch-size phases as in Apertus (docs/recipe.md 5).
      microbatch_size: rows per microbatch for gradient accumulation; 0 = the whole batch in one pass.
      loss_chunk_tokens: tokens per chunk of the fused lm_head + cross-entropy (memory/speed only; the loss is
        the same for any value).
      z_loss_weight: weight of the z-loss `mean(log Z^2)` added to the objective (PaLM; 0 = off, e.g. 1e-4).
      spike_factor: skip an update whose loss or pre-clip gradient norm exceeds this multiple of its running
        mean (`apertus_jax.optim.spikes`); 0 = off, else > 1.
      spike_warmup_steps: accepted updates before the spike guard is armed.
      spike_ema_decay: decay of the guard's running means, in [0, 1).
      prefetch_batches: batches the data pipeline produces ahead in a background thread (0 = inline).
    """

    steps: int = 300
    batch_plan: tuple = ((0, 16 * 128),)
    microbatch_size: int = 0
    loss_chunk_tokens: int = 256
    z_loss_weight: float = 0.0
    spike_factor: float = 0.0
    spike_warmup_steps: int = 20
    spike_ema_decay: float = 0.99
    prefetch_batches: int = 2

    def __post_init__(self):
        check_number("train.steps", self.steps, low=1, integer=True)
        check_number("train.microbatch_size", self.microbatch_size, low=0, integer=True)
        check_number("train.loss_chunk_tokens", self.loss_chunk_tokens, low=1, integer=True)
        check_number("train.z_loss_weight", self.z_loss_weight, low=0)
        check_number("train.spike_factor", self.spike_factor, low=0)
        if 0 < self.spike_factor <= 1:
            raise ValueError(f"train.spike_factor={self.spike_factor} must be 0 (off) or > 1")
        check_number("train.spike_warmup_steps", self.spike_warmup_steps, low=1, integer=True)
        check_number("train.spike_ema_decay", self.spike_ema_decay, low=0, high=1, high_open=True)
        check_number("train.prefetch_batches", self.prefetch_batches, low=0, integer=True)
        try:
            phases = [tuple(phase) for phase in self.batch_plan]
        except TypeError:
            phases = None
        if not phases or any(len(phase) != 2 for phase in phases):
            raise ValueError(
                f"train.batch_plan={self.batch_plan!r} must be ((start_tokens, tokens_per_batch), ...)"
            )
        for start, tokens in phases:
            check_number("train.batch_plan start_tokens", start, low=0, integer=True)
            check_number("train.batch_plan tokens_per_batch", tokens, low=1, integer=True)
        BatchSizePlan(phases)  # one-line errors for a plan that does not start at 0 or is not increasing
        object.__setattr__(self, "batch_plan", tuple(phases))

    @property
    def plan(self) -> BatchSizePlan:
        return BatchSizePlan(self.batch_plan)


@dataclasses.dataclass(frozen=True)
class CheckpointConfig:
    """The `checkpoint` section.

    Attributes:
      every_steps: save every N steps (and at the end, and on SIGTERM).
      keep: how many recent checkpoints to keep.
      async_save: write arrays in a background thread while training goes on.
      init_from: a workdir whose newest checkpoint's PARAMETERS initialize a fresh run (optimizer state and
        data start fresh; e.g. fine-tuning or a context-extension stage), or "hf:DIR", a HF checkpoint
        directory (`config.json`, safetensors, `tokenizer.json`; continued pretraining from released weights:
        `apertus_jax.models.hf.check_init_dir`, `read_params`). "" = random initialization. Ignored once this
        run has a checkpoint of its own (then it resumes).
    """

    every_steps: int = 100
    keep: int = 3
    async_save: bool = True
    init_from: str = ""

    def __post_init__(self):
        check_number("checkpoint.every_steps", self.every_steps, low=1, integer=True)
        check_number("checkpoint.keep", self.keep, low=1, integer=True)


@dataclasses.dataclass(frozen=True)
class FaultsConfig:
    """The `faults` section: `max_nonfinite_in_a_row` non-finite steps before a rollback (0 disables);
    `preemption_check_every_steps`: how often several processes agree on a SIGTERM (an allgather)."""

    max_nonfinite_in_a_row: int = 5
    preemption_check_every_steps: int = 10

    def __post_init__(self):
        check_number("faults.max_nonfinite_in_a_row", self.max_nonfinite_in_a_row, low=0, integer=True)
        check_number(
            "faults.preemption_check_every_steps", self.preemption_check_every_steps, low=1, integer=True
        )


@dataclasses.dataclass(frozen=True)
class MetricsConfig:
    """The `metrics` section: `wandb_project` also logs every scalar to Weights & Biases ("" = off; needs the
    `wandb` extra, checked up front)."""

    wandb_project: str = ""

    def __post_init__(self):
        check_wandb_config(self)


def _default_model() -> ModelConfig:
    return model_presets.get_config("tiny")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything the trainer reads: one typed section each (defaults: the tiny demo run).

    Attributes:
      seed: parameter initialization and the data order (>= 0).
      model, data, train, optim, mesh, checkpoint, faults, metrics, profile: the sections (module docstring).

    Raises:
      ValueError: in `__post_init__`, a negative or non-integer seed (each section checks itself).
    """

    seed: int = 0
    model: ModelConfig = dataclasses.field(default_factory=_default_model)
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    optim: OptimConfig = dataclasses.field(default_factory=OptimConfig)
    mesh: MeshConfig = dataclasses.field(default_factory=MeshConfig)
    checkpoint: CheckpointConfig = dataclasses.field(default_factory=CheckpointConfig)
    faults: FaultsConfig = dataclasses.field(default_factory=FaultsConfig)
    metrics: MetricsConfig = dataclasses.field(default_factory=MetricsConfig)
    profile: ProfileConfig = dataclasses.field(default_factory=ProfileConfig)

    def __post_init__(self):
        check_number("seed", self.seed, low=0, integer=True)

    def replace(self, **sections) -> "RunConfig":
        """A copy with whole sections replaced (`config.replace(train=dataclasses.replace(config.train,
        steps=10))`)."""
        return dataclasses.replace(self, **sections)

    def to_dict(self) -> dict[str, Any]:
        """Plain values of every section (the pipeline normalized): what metric writers record."""
        out = {"seed": self.seed}
        for field in dataclasses.fields(RunConfig):  # a subclass's own sections are its own to add
            value = getattr(self, field.name)
            if field.name == "seed":
                continue
            out[field.name] = value.to_dict() if hasattr(value, "to_dict") else dataclasses.asdict(value)
        return out


def check_layout(config: RunConfig, num_devices: int, num_processes: int = 1) -> tuple[int, int, int, int]:
    """The rules that need the device and process counts; returns the resolved (data, fsdp, tensor, context)
    mesh shape. Every batch of the plan must split into rows, over the batch-sharded devices, the data shards
    and the microbatches; rows must split over the context devices.

    Raises:
      ValueError: one line naming the offending field and what to do.
    """
    mesh_shape = config.mesh.resolve(num_devices)
    seq_len, micro = config.data.seq_len, config.train.microbatch_size
    batch_ways = mesh_shape[0] * mesh_shape[1]
    context = mesh_shape[3]
    if seq_len % context:
        raise ValueError(
            f"data.seq_len={seq_len} does not split over mesh.context={context} devices; "
            "choose a context size that divides the sequence length"
        )
    if config.data.num_shards % num_processes:
        raise ValueError(
            f"data.num_shards={config.data.num_shards} must be 0 (one per process) or a multiple "
            f"of the {num_processes} processes"
        )
    shards = config.data.num_shards or num_processes
    for _, tokens in config.train.batch_plan:
        if tokens % seq_len:
            raise ValueError(
                f"train.batch_plan: {tokens} tokens per batch is not a multiple of data.seq_len={seq_len}"
            )
        rows = tokens // seq_len
        if rows % batch_ways:
            raise ValueError(
                f"train.batch_plan: a batch of {rows} rows is not divisible by the data*fsdp mesh axes "
                f"({batch_ways}); change the batch or --config.mesh.*"
            )
        if rows % shards:
            raise ValueError(
                f"train.batch_plan: a batch of {rows} rows does not split over {shards} data shards "
                "(data.num_shards, default one per process)"
            )
        if micro and (rows % micro or micro % batch_ways):
            raise ValueError(
                f"train.microbatch_size={micro} must divide the batch ({rows} rows) and be a multiple "
                f"of data*fsdp ({batch_ways})"
            )
    return mesh_shape
