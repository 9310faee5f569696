"""The run configuration: the sections composed into one schema, and up-front validation.

Each package owns its section, its defaults and its range checks: `model` (`apertus_jax.models.presets`,
`ModelConfig`), `data` (`apertus_jax.data.config.DataConfig`), `optim` (`apertus_jax.optim.config.OptimConfig`),
`mesh` (`apertus_jax.models.partitioning.MeshConfig`), `posttrain` (`apertus_jax.posttrain.config`),
`profile` (`apertus_jax.train.profiling`), `eval` (`apertus_jax.eval.config.EvalConfig`); the train package owns `train`, `checkpoint`, `faults` and
`metrics` (below). Config files in `configs/` return `base_config()` with changed values; absl flags override
single values (`--config.train.steps=100`). The schema is the key set of `base_config()`: a config file or
override that adds, misspells or drops a key is rejected. `validate` builds every section (one-line errors)
and checks the rules that span sections before anything is built or written.
"""

import dataclasses

import ml_collections

from apertus_jax.checks import check_number
from apertus_jax.data import config as data_config
from apertus_jax.eval import config as eval_config
from apertus_jax.models import presets as model_presets
from apertus_jax.models.config import ModelConfig
from apertus_jax.models.partitioning import MeshConfig
from apertus_jax.optim import config as optim_config
from apertus_jax.optim.batch_plan import BatchSizePlan
from apertus_jax.posttrain import config as posttrain_config
from apertus_jax.train.profiling import ProfileConfig
from apertus_jax.train.wandb_writer import check_wandb_config


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
        data start fresh; e.g. fine-tuning or a context-extension stage). "" = random initialization. Ignored
        once this run has a checkpoint of its own (then it resumes).
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


def _fields(cls) -> dict:
    return {f.name: f.default for f in dataclasses.fields(cls)}


def base_config() -> ml_collections.ConfigDict:
    """Defaults of every section, each from its owner; config files change values, never keys."""
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.model = model_presets.model_section("tiny")
    c.data = ml_collections.ConfigDict(data_config.section())
    c.train = ml_collections.ConfigDict(_fields(TrainConfig))
    c.optim = ml_collections.ConfigDict(optim_config.section())
    c.mesh = ml_collections.ConfigDict(_fields(MeshConfig))
    c.checkpoint = ml_collections.ConfigDict(_fields(CheckpointConfig))
    c.faults = ml_collections.ConfigDict(_fields(FaultsConfig))
    c.metrics = ml_collections.ConfigDict(_fields(MetricsConfig))
    c.posttrain = ml_collections.ConfigDict(posttrain_config.section())
    c.profile = ml_collections.ConfigDict(_fields(ProfileConfig))
    c.eval = ml_collections.ConfigDict(eval_config.section())
    return c


def apply_preset_override(config: ml_collections.ConfigDict, argv: list[str]) -> None:
    """Gives `--config.model.preset=NAME` its meaning: the model section becomes preset NAME's fields, with the
    other `--config.model.*` overrides in `argv` applied on top (the config file's own model fields are
    dropped). Without a preset override, nothing changes.

    Raises:
      ValueError: NAME is not a model preset (one line listing the valid names).
    """
    names = {a[len("--config.model.") :].split("=")[0] for a in argv if a.startswith("--config.model.")}
    if "preset" not in names:
        return
    overrides = {name: config.model[name] for name in names - {"preset"}}
    with config.unlocked():
        config.model = model_presets.model_section(config.model.preset, **overrides)


def model_config(config: ml_collections.ConfigDict) -> ModelConfig:
    """The ModelConfig of `config.model` (raises ModelConfig's one-line ValueError when inconsistent)."""
    return model_presets.from_section(config.model)


@dataclasses.dataclass(frozen=True)
class RunSections:
    """A validated run config: each section as its owner's typed object, the mesh resolved."""

    seed: int
    model: ModelConfig
    data: data_config.DataConfig
    train: TrainConfig
    optim: optim_config.OptimConfig
    mesh_shape: tuple[int, int, int, int]  # (data, fsdp, tensor, context)
    checkpoint: CheckpointConfig
    faults: FaultsConfig
    metrics: MetricsConfig
    posttrain: posttrain_config.PosttrainConfig
    profile: ProfileConfig
    eval: eval_config.EvalConfig


def _keys(c, prefix=""):
    keys = set()
    for k, v in c.items():
        keys.add(prefix + k)
        if isinstance(v, ml_collections.ConfigDict) and prefix + k != "data.pipeline":
            keys |= _keys(v, prefix + k + ".")
    return keys


def sections(config: ml_collections.ConfigDict, num_devices: int, num_processes: int = 1) -> RunSections:
    """Checks keys, every section and the rules across sections; returns the typed sections.

    Raises:
      ValueError: one line naming the offending field and what to do.
    """
    expected, got = _keys(base_config()), _keys(config)
    if got != expected:
        unknown, missing = sorted(got - expected), sorted(expected - got)
        raise ValueError(
            f"config keys differ from the schema (apertus_jax/train/config.py): "
            f"unknown {unknown}, missing {missing}"
        )
    check_number("seed", config.seed, low=0, integer=True)
    run = RunSections(
        seed=config.seed,
        model=model_config(config),
        data=data_config.from_section(config.data),
        train=TrainConfig(**config.train),
        optim=optim_config.from_section(config.optim),
        mesh_shape=MeshConfig(**config.mesh).resolve(num_devices),
        checkpoint=CheckpointConfig(**config.checkpoint),
        faults=FaultsConfig(**config.faults),
        metrics=MetricsConfig(**config.metrics),
        posttrain=posttrain_config.PosttrainConfig(**config.posttrain),
        profile=ProfileConfig(**config.profile),
        eval=eval_config.EvalConfig(**config.eval),
    )
    _check_batches(run, num_processes)
    return run


def _check_batches(run: RunSections, num_processes: int) -> None:
    """Every batch of the plan splits into rows, over the batch-sharded devices, data shards and microbatches."""
    seq_len, micro = run.data.seq_len, run.train.microbatch_size
    batch_ways = run.mesh_shape[0] * run.mesh_shape[1]
    context = run.mesh_shape[3]
    if seq_len % context:
        raise ValueError(
            f"data.seq_len={seq_len} does not split over mesh.context={context} devices; "
            "choose a context size that divides the sequence length"
        )
    if run.data.num_shards % num_processes:
        raise ValueError(
            f"data.num_shards={run.data.num_shards} must be 0 (one per process) or a multiple "
            f"of the {num_processes} processes"
        )
    shards = run.data.num_shards or num_processes
    for _, tokens in run.train.batch_plan:
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


def validate(
    config: ml_collections.ConfigDict, num_devices: int, num_processes: int = 1
) -> tuple[int, int, int]:
    """`sections(...)` for its checks; returns the resolved (data, fsdp, tensor, context) mesh shape.

    Raises:
      ValueError: one line naming the offending field and what to do.
    """
    return sections(config, num_devices, num_processes).mesh_shape
