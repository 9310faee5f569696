"""The run configuration: schema, defaults and up-front validation (one-line errors before any work).

Config files in `configs/` return `base_config()` with changed values; absl flags override single values
(`--config.train.steps=100`). The schema is the key set of `base_config()`: a config file or override that
adds, misspells or drops a key is rejected. Cross-field rules are checked by `validate` before anything is
built or written.
"""

import dataclasses

import ml_collections
import numpy as np

from apertus_jax.data.config import normalize_data_config
from apertus_jax.models.config import ModelConfig
from apertus_jax.models.presets import get_config as get_model_config
from apertus_jax.optim.presets import get_optim_preset
from apertus_jax.train.wandb_writer import check_wandb_config

MESH_AXES = ("data", "fsdp", "tensor")


def model_section(preset: str, **overrides) -> ml_collections.ConfigDict:
    """Every `ModelConfig` field of model preset `preset` (with overrides), plus the preset name."""
    fields = dataclasses.asdict(get_model_config(preset, **overrides))
    return ml_collections.ConfigDict({"preset": preset, **fields})


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
        config.model = model_section(config.model.preset, **overrides)


def apply_optim_preset(config: ml_collections.ConfigDict, name: str) -> None:
    """Copies optimizer preset `name` ("apertus-8b" | "apertus-70b") into `config.optim` and its (snapped)
    batch-size plan into `config.train.batch_plan`; train.steps becomes the preset's token budget in steps."""
    preset = get_optim_preset(name)
    for field in (
        "peak_lr",
        "warmup_tokens",
        "decay_tokens",
        "total_tokens",
        "init_fraction",
        "final_fraction",
        "b1",
        "b2",
        "b3",
        "alpha",
        "alpha_warmup_steps",
        "b3_warmup_steps",
        "eps",
        "weight_decay",
        "clip_norm",
    ):
        config.optim[field] = getattr(preset, field)
    config.optim.name, config.optim.schedule, config.optim.decay_shape = "ademamix", "wsd", "1-sqrt"
    config.train.batch_plan = preset.batch_plan.phases
    config.train.steps = preset.total_steps()


APERTUS_COMPONENTS = (
    "fineweb_edu",
    "fineweb_edu_3",
    "fineweb_hq",
    "fineweb2_hq",
    "starcoder",
    "finemath",
    "megamath_web",
    "dclm_edu",
    "stack_v2_edu",
    "wikipedia",
    "parallel",
    "instruct",
)


def apertus_recipe(
    preset: str, stage_bounds: tuple[float, ...], tensor: int, every_steps: int
) -> ml_collections.ConfigDict:
    """The Apertus pretraining recipe for model preset `preset` ("apertus-8b" | "apertus-70b"), unlocked.

    bf16 compute, scanned layers with full remat, cuDNN attention, tekken at 4,096 tokens, the five
    curriculum stages ending at `stage_bounds` (tokens), the optimizer preset of the same name (AdEMAMix,
    WSD 1-sqrt, batch doubling; docs/recipe.md 4-6), mesh fsdp=-1 x `tensor`. Gradient accumulation over 256-row
    microbatches: one 4,096-token row per batch-sharded device on 256 such devices; set
    `train.microbatch_size` to your data x fsdp device count x rows per device (`experiments.memory_plan`).
    """
    config = base_config()
    config.model = model_section(
        preset, dtype="bfloat16", scan_layers=True, remat_policy="full", attention_impl="cudnn"
    )
    config.data.tokenizer = "tekken"
    config.data.seq_len = 4096
    config.data.pipeline = apertus_stages(stage_bounds=stage_bounds)
    apply_optim_preset(config, preset)
    config.train.microbatch_size = 256
    config.mesh.data, config.mesh.fsdp, config.mesh.tensor = 1, -1, tensor
    config.checkpoint.every_steps = every_steps
    return config


def apertus_stages(stage_bounds: tuple[float, float, float, float], root: str = "/data/apertus") -> dict:
    """The 5-stage Apertus curriculum (docs/recipe.md 6) as a `data.pipeline` dict over ArrayRecord shard sets
    `root/<component>`, each stage with its own seed. The stage composition follows docs/recipe.md 6; the exact
    shares within a stage are illustrative (English ~57%, multilingual 33% then 10%, code/math the rest).

    Args:
      stage_bounds: token counts where stages 2, 3, 4 and 5 start (8B: 7T, 9T, 12T, 13.5T).
    """
    english = lambda name: {name: 0.57}
    stages = [
        {**english("fineweb_edu"), "fineweb2_hq": 0.33, "starcoder": 0.07, "finemath": 0.03},
        {
            "fineweb_edu_3": 0.285,
            "fineweb_hq": 0.285,
            "fineweb2_hq": 0.33,
            "starcoder": 0.07,
            "finemath": 0.03,
        },
        {
            "fineweb_edu_3": 0.285,
            "fineweb_hq": 0.285,
            "fineweb2_hq": 0.33,
            "starcoder": 0.06,
            "finemath": 0.02,
            "megamath_web": 0.02,
        },
        {"dclm_edu": 0.8, "fineweb2_hq": 0.1, "megamath_web": 0.05, "starcoder": 0.05},
        {
            "dclm_edu": 0.6,
            "fineweb2_hq": 0.1,
            "stack_v2_edu": 0.08,
            "starcoder": 0.05,
            "wikipedia": 0.07,
            "parallel": 0.03,
            "instruct": 0.07,
        },
    ]
    bounds = [int(b) for b in stage_bounds] + [None]
    return dict(
        components={name: dict(kind="arrayrecord", paths=[f"{root}/{name}"]) for name in APERTUS_COMPONENTS},
        stages=[
            dict(name=f"stage{i + 1}", until_tokens=bound, weights=weights, seed=i + 1)
            for i, (weights, bound) in enumerate(zip(stages, bounds))
        ],
        goldfish=dict(k=50, h=50, hash="apertus"),
        split_seed=0,
    )


def base_config() -> ml_collections.ConfigDict:
    """Defaults of every section; config files change values, never keys."""
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.model = model_section("tiny")
    c.data = ml_collections.ConfigDict(
        dict(
            # "demo": a SentencePiece BPE trained on the demo corpus (cached, apertus_jax/train/inputs.py), or any
            # load_tokenizer spec: "tekken", "sentencepiece:/path/m.model", "hf:/path/tokenizer.json".
            tokenizer="demo",
            demo_tokenizer_vocab=4096,
            seq_len=128,
            # Data shards (0: one per process). Fixing it makes the batches independent of the process count.
            num_shards=0,
            # The data pipeline's own config (components, curriculum stages, Goldfish), validated by
            # apertus_jax.data.config.normalize_data_config; its keys are not part of this schema.
            pipeline=dict(
                components=dict(demo=dict(kind="demo")),
                goldfish=dict(k=50, h=50, hash="apertus"),
                split_seed=0,
            ),
        )
    )
    c.train = ml_collections.ConfigDict(
        dict(
            steps=300,
            # ((start_tokens, tokens_per_batch), ...): batch-size doubling as in Apertus (docs/recipe.md 5).
            batch_plan=((0, 16 * 128),),
            microbatch_size=0,  # rows per microbatch; 0 = the whole per-step batch in one pass
            log_every=1,
        )
    )
    c.optim = ml_collections.ConfigDict(
        dict(
            name="ademamix",
            peak_lr=3e-3,
            schedule="wsd",  # "wsd" or "cosine"; lengths in TOKENS
            warmup_tokens=30 * 16 * 128,
            decay_tokens=60 * 16 * 128,
            total_tokens=300 * 16 * 128,
            init_fraction=0.0,
            final_fraction=0.1,
            decay_shape="1-sqrt",
            b1=0.9,
            b2=0.999,
            b3=0.9999,
            alpha=8.0,
            alpha_warmup_steps=0,
            b3_warmup_steps=0,
            eps=1e-8,
            weight_decay=0.1,
            clip_norm=0.1,
        )
    )
    c.mesh = ml_collections.ConfigDict(dict(data=-1, fsdp=1, tensor=1))
    c.checkpoint = ml_collections.ConfigDict(dict(every_steps=100, keep=3, async_save=True))
    c.faults = ml_collections.ConfigDict(dict(max_nonfinite_in_a_row=5))
    # Optional Weights & Biases project ("" = off); see apertus_jax/train/wandb_writer.py.
    c.metrics = ml_collections.ConfigDict(dict(wandb_project=""))
    return c


def _keys(c, prefix=""):
    keys = set()
    for k, v in c.items():
        keys.add(prefix + k)
        if isinstance(v, ml_collections.ConfigDict) and prefix + k != "data.pipeline":
            keys |= _keys(v, prefix + k + ".")
    return keys


def resolve_mesh_shape(mesh: dict, num_devices: int) -> tuple[int, int, int]:
    """(data, fsdp, tensor) sizes with at most one -1 ("fill") resolved against `num_devices`.

    Raises:
      ValueError: more than one -1, a size < 1, or sizes that do not divide / multiply to the device count.
    """
    shape = [int(mesh[name]) for name in MESH_AXES]
    named = ", ".join(f"{n}={s}" for n, s in zip(MESH_AXES, shape))
    if shape.count(-1) > 1 or any(s < 1 and s != -1 for s in shape):
        raise ValueError(f"mesh ({named}): sizes must be >= 1, with at most one -1 (fill)")
    fixed = int(np.prod([s for s in shape if s != -1]))
    if -1 in shape:
        if num_devices % fixed:
            raise ValueError(
                f"mesh ({named}) does not divide the {num_devices} devices; "
                "change --config.mesh.* so the fixed sizes divide the device count"
            )
        shape[shape.index(-1)] = num_devices // fixed
    elif fixed != num_devices:
        raise ValueError(
            f"mesh ({named}) needs {fixed} devices but {num_devices} are available; "
            "change --config.mesh.* (or set one axis to -1)"
        )
    return tuple(shape)


def model_config(config: ml_collections.ConfigDict) -> ModelConfig:
    """The ModelConfig of `config.model` (raises ModelConfig's one-line ValueError when inconsistent)."""
    fields = {k: v for k, v in config.model.items() if k != "preset"}
    return ModelConfig(**fields)


def validate(
    config: ml_collections.ConfigDict, num_devices: int, num_processes: int = 1
) -> tuple[int, int, int]:
    """Checks keys and cross-field rules; returns the resolved (data, fsdp, tensor) mesh shape.

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
    model_config(config)  # raises ModelConfig's one-line error on inconsistent model fields
    mesh_shape = resolve_mesh_shape(config.mesh, num_devices)
    seq_len = config.data.seq_len
    if seq_len < 2:
        raise ValueError(f"data.seq_len={seq_len} must be >= 2")
    if config.train.steps < 1:
        raise ValueError(f"train.steps={config.train.steps} must be >= 1")
    batch_ways = mesh_shape[0] * mesh_shape[1]
    for start, tokens in config.train.batch_plan:
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
        shards = config.data.num_shards or num_processes
        if rows % shards:
            raise ValueError(
                f"train.batch_plan: a batch of {rows} rows does not split over {shards} data shards "
                "(data.num_shards, default one per process)"
            )
        micro = config.train.microbatch_size
        if micro and (rows % micro or micro % batch_ways):
            raise ValueError(
                f"train.microbatch_size={micro} must divide the batch ({rows} rows) and be a multiple "
                f"of data*fsdp ({batch_ways})"
            )
    if config.data.num_shards < 0 or (config.data.num_shards and config.data.num_shards % num_processes):
        raise ValueError(
            f"data.num_shards={config.data.num_shards} must be 0 (one per process) or a multiple "
            f"of the {num_processes} processes"
        )
    normalize_data_config(config.data.pipeline)
    if config.checkpoint.every_steps < 1 or config.checkpoint.keep < 1:
        raise ValueError("checkpoint.every_steps and checkpoint.keep must be >= 1")
    if config.faults.max_nonfinite_in_a_row < 0:
        raise ValueError("faults.max_nonfinite_in_a_row must be >= 0 (0 disables rollbacks)")
    check_wandb_config(config.metrics)
    if config.optim.schedule not in ("wsd", "cosine"):
        raise ValueError(f"optim.schedule={config.optim.schedule!r} must be 'wsd' or 'cosine'")
    return mesh_shape
