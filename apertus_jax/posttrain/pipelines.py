"""Which batch iterator a run config's data section asks for: the post-training ones or the pretraining one.

Data components of kind "chat" (conversation JSONL, SFT) or "preference" (preference JSONL, QRPO/DPO) select
`sft_data.ChatPipeline` / `preference_data.PreferencePipeline`; their `paths` are read in order. Rules
checked up front (one line each): post-training components are not mixed with other kinds or stages,
Goldfish is off (`data.pipeline.goldfish.k = 0`), chat data trains with `posttrain.objective = "lm"` and
preference data with "qrpo" or "dpo" (and those need preference data).
"""

import functools
from collections.abc import Callable

import jax

from apertus_jax.posttrain import reference as reference_lib
from apertus_jax.posttrain.config import PosttrainConfig
from apertus_jax.posttrain.preference_data import PreferencePipeline
from apertus_jax.posttrain.sft_data import ChatPipeline

KINDS = ("chat", "preference")


def reference_workdir(config) -> str:
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


def load_reference_model(config) -> tuple[reference_lib.ReferenceModel, int]:
    """The frozen reference (`reference_workdir`'s newest parameters) on the run's mesh, and its step.

    Raises:
      FileNotFoundError / ValueError: as `checkpoint.restore_workdir_params`.
    """
    from apertus_jax.models import partitioning, presets
    from apertus_jax.train.checkpoint import restore_workdir_params
    from apertus_jax.train.train_state import make_param_spec

    mesh_shape = partitioning.MeshConfig(**config.mesh).resolve(jax.device_count())
    mesh = partitioning.make_mesh(*mesh_shape, devices=jax.devices())
    spec = make_param_spec(presets.from_section(config.model), mesh, config.seed)
    params, meta = restore_workdir_params(reference_workdir(config), spec.abstract)
    return reference_lib.ReferenceModel(spec.apply_fn, params), meta["progress"]["step"]


def posttrain_builder(config, tokenizer) -> Callable | None:
    """A `build_train_pipeline`-like builder for post-training data, or None for pretraining data.

    Raises:
      ValueError: a broken rule of the module docstring, a missing reference cache (FileNotFoundError).
    """
    pipeline = (
        config.data.pipeline.to_dict() if hasattr(config.data.pipeline, "to_dict") else config.data.pipeline
    )
    posttrain = PosttrainConfig(**config.posttrain)
    kinds = {c["kind"] for c in pipeline["components"].values()}
    if not kinds & set(KINDS):
        if posttrain.objective != "lm":
            raise ValueError(
                f"posttrain.objective={posttrain.objective!r} needs a data component of kind 'preference'"
            )
        return None
    if len(kinds) > 1 or pipeline.get("stages"):
        raise ValueError(
            f"data.pipeline: components of kind {sorted(set(KINDS) & kinds)} take no stages and no other kinds"
        )
    if (pipeline.get("goldfish") or {}).get("k", 0):
        raise ValueError(
            "data.pipeline.goldfish.k must be 0 for post-training data (no Goldfish in SFT/QRPO)"
        )
    (kind,) = kinds
    paths = component_paths(config, kind)
    if kind == "chat":
        if posttrain.objective != "lm":
            raise ValueError(f"chat data trains with posttrain.objective='lm', not {posttrain.objective!r}")
        return lambda data_config, tokenizer, **kwargs: ChatPipeline(paths, tokenizer, **kwargs)
    if posttrain.objective == "lm":
        raise ValueError("preference data needs posttrain.objective='qrpo' or 'dpo'")
    if posttrain.reference == "on_the_fly":
        model, _ = load_reference_model(config)
        make_reference = lambda examples: reference_lib.on_the_fly_reference(model)
    else:
        if not posttrain.reference_cache:
            raise ValueError(
                "posttrain.reference_cache is empty; `python -m experiments.qrpo` sets and writes it"
            )
        fingerprint = reference_lib.cache_fingerprint(paths, tokenizer, config.data.seq_len)

        def make_reference(examples):
            cache = reference_lib.read_cache(posttrain.reference_cache, fingerprint, len(examples))
            return reference_lib.cached_reference(cache["logprobs"])

    builder = functools.partial(
        PreferencePipeline, paths, mode=posttrain.objective, make_reference=make_reference
    )
    return lambda data_config, tokenizer, **kwargs: builder(tokenizer, **kwargs)


def component_paths(config, kind: str) -> list[str]:
    """The `paths` of the run's data components of `kind`, in order."""
    components = config.data.pipeline.components
    return [
        p
        for c in components.values()
        if c["kind"] == kind
        for p in ([c["paths"]] if isinstance(c["paths"], str) else c["paths"])
    ]
