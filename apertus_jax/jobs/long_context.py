"""Context-extension stages (docs/recipe.md section 5; docs/long_context.md): one run per stage.

After pretraining at 4,096 tokens, Apertus extends the context in stages (8B: 8k / 16k / 32k / 64k with RoPE
theta 1M / 2M / 4M / 12M), keeping the tokens per batch (fewer, longer rows), warming the learning rate up
again at each stage and then holding it constant (Apertus report section 2.5, Table 5).

Here every stage is an ordinary run (`stage_config`): its own `data.seq_len`, `model.rope_theta`, batch,
LR schedule (WSD with no cooldown: linear warmup, then constant) and mesh (a larger `mesh.context` for
longer rows), initialized from the previous stage's workdir with `checkpoint.init_from` (parameters only, a
fresh optimizer state). A long-context config file lists its `STAGES` and returns each stage's run config
from `get_config(name)` (`load_stages`). `run_stages` runs them in order in `ROOT/<stage name>`, skips
finished stages, and resumes an interrupted one from its own checkpoints like any run; `ROOT/metrics.jsonl`
joins the stages' records, each tagged with its stage.
"""

import dataclasses
import json
import os
from collections.abc import Callable, Mapping, Sequence

import ml_collections
from absl import logging

from apertus_jax import files
from apertus_jax.checks import check_number
from apertus_jax.config.schema import Config, call_config, load_module, parse
from apertus_jax.jobs import pretrain as pretrain_job
from apertus_jax.train.checkpoint import Checkpointer


@dataclasses.dataclass(frozen=True)
class ContextStage:
    """One context-extension stage.

    Attributes:
      name: the stage's name and its workdir under the root ("8k", ...).
      seq_len: tokens per row.
      rope_theta: RoPE base of the stage (the llama3 frequency scaling constants are kept).
      tokens: training tokens of the stage (rounded down to whole batches).
      context: the `mesh.context` size of the stage (1: no context parallelism; -1: all devices the other
        mesh axes leave).

    Raises:
      ValueError: in `__post_init__`, an empty name or a number out of range (one line).
    """

    name: str
    seq_len: int
    rope_theta: float
    tokens: int
    context: int = 1

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name or os.sep in self.name:
            raise ValueError(f"stage name {self.name!r} must be a non-empty directory name")
        check_number(f"stage {self.name} seq_len", self.seq_len, low=2, integer=True)
        check_number(f"stage {self.name} rope_theta", self.rope_theta, low=0, low_open=True)
        check_number(f"stage {self.name} tokens", self.tokens, low=1, integer=True)
        if self.context != -1:
            check_number(f"stage {self.name} context", self.context, low=1, integer=True)


def stage_config(
    base: ml_collections.ConfigDict,
    stage: ContextStage,
    *,
    batch_tokens: int,
    peak_lr: float,
    warmup_tokens: int,
) -> ml_collections.ConfigDict:
    """The run config of `stage`: `base` (a run config, e.g. the pretraining recipe with a long-context data
    mixture) with the stage's length, theta, context size, a batch of `batch_tokens` tokens
    (`batch_tokens / seq_len` rows), `tokens // batch_tokens` steps and an LR warmed up from 0 over
    `warmup_tokens` to `peak_lr`, then constant to the end of the stage (WSD with `decay_tokens = 0`).
    AdEMAMix's alpha and beta3 warm up over the same steps (its slow momentum starts from zero).
    `checkpoint.init_from` is left to the caller (`run_stages`). Returns an unlocked copy.

    Raises:
      ValueError: `batch_tokens` not a multiple of `seq_len`, or a stage shorter than one batch or than
        its warmup.
    """
    if batch_tokens % stage.seq_len:
        raise ValueError(
            f"stage {stage.name}: {batch_tokens} tokens per batch is not a multiple of seq_len {stage.seq_len}"
        )
    steps = stage.tokens // batch_tokens
    if steps < 1 or warmup_tokens > steps * batch_tokens:
        raise ValueError(
            f"stage {stage.name}: {stage.tokens} tokens make {steps} batches of {batch_tokens}, fewer than one "
            f"batch or than its warmup of {warmup_tokens} tokens; lengthen the stage"
        )
    config = ml_collections.ConfigDict(base.to_dict())
    config.data.seq_len = stage.seq_len
    config.model.rope_theta = float(stage.rope_theta)
    config.model.max_seq_len = stage.seq_len
    config.mesh.context = stage.context
    config.train.batch_plan = ((0, batch_tokens),)
    config.train.steps = steps
    config.optim.schedule = "wsd"
    config.optim.peak_lr = peak_lr
    config.optim.init_fraction = 0.0
    config.optim.warmup_tokens = warmup_tokens
    config.optim.decay_tokens = 0
    config.optim.total_tokens = steps * batch_tokens
    warmup_steps = -(-warmup_tokens // batch_tokens)
    config.optim.alpha_warmup_steps = config.optim.b3_warmup_steps = warmup_steps
    return config


def load_stages(path: str) -> list[tuple[str, Config]]:
    """[(stage name, parsed run config), ...] of the long-context config file `path`: a Python file with
    `STAGES` (ContextStage objects) and `get_config(stage name)`, e.g. `configs/runs/apertus_8b_long_context.py`.
    Every stage's config is parsed before any stage runs.

    Raises:
      ValueError: the file is missing, has no `STAGES` / `get_config`, raised (`ConfigFileError`: its file and
        line), or a stage's config is invalid (`stage NAME: ...`).
    """
    module = load_module(path, "long_context_config")
    if not hasattr(module, "STAGES") or not hasattr(module, "get_config"):
        raise ValueError(f"--config={path} must define STAGES and get_config(stage)")
    stages = []
    for stage in module.STAGES:
        try:
            stages.append((stage.name, parse(call_config(module, "get_config", stage.name))))
        except ValueError as error:
            raise ValueError(f"stage {stage.name}: {error}") from None
    return stages


def stage_finished(workdir: str, steps: int) -> bool:
    """Whether `workdir` holds a checkpoint at step `steps` (the run's last step)."""
    directory = os.path.join(workdir, "checkpoints")
    if not os.path.isdir(directory):
        return False
    checkpointer = Checkpointer(directory, keep=1_000_000, async_save=False)
    try:
        return steps in checkpointer.all_steps()
    finally:
        checkpointer.close()


def merge_metrics(root: str, rope_thetas: Mapping[str, float]) -> str:
    """Writes ROOT/metrics.jsonl: the records of each stage's metrics.jsonl in stage order (`rope_thetas`: the
    RoPE base of each stage by name), each with "stage" (its name), "stage_step" (its step within the stage)
    and "rope_theta"; "step" counts on across stages.
    Rewritten whole each time (atomic), so a restarted driver gives the same file. Returns its path."""
    path = os.path.join(root, "metrics.jsonl")
    offset, lines = 0, []
    for name, rope_theta in rope_thetas.items():
        stage_path = os.path.join(root, name, "metrics.jsonl")
        if not os.path.exists(stage_path):
            break
        with open(stage_path) as f:
            records = [json.loads(line) for line in f if line.strip()]
        for record in records:
            lines.append(
                json.dumps(
                    {
                        **record,
                        "stage": name,
                        "stage_step": record["step"],
                        "step": offset + record["step"],
                        "rope_theta": rope_theta,
                    }
                )
            )
        offset += records[-1]["step"] if records else 0
    files.write_text(path, "".join(line + "\n" for line in lines))
    return path


def run_stages(
    stages: Sequence[tuple[str, Config]],
    root: str,
    init_from: str,
    train: Callable[[Config, str], str] = pretrain_job.pretrain,
) -> str:
    """Runs the `(name, config)` stages in order in ROOT/<name>; returns "done" or "preempted".

    Stage 1 initializes its parameters from `init_from` (the pretraining workdir, or hf:DIR), stage i from
    ROOT/<name of stage i-1>. A stage with a checkpoint at its last step is skipped; an interrupted one
    resumes from its own newest checkpoint (its `init_from` is then ignored, as in any run). A preempted
    stage (SIGTERM) stops the driver; rerunning it continues.

    Raises:
      ValueError / FileNotFoundError: as `apertus_jax.train.loop.train` (bad data, missing `init_from`).
    """
    names = [name for name, _ in stages]
    if len(set(names)) != len(names):
        raise ValueError(f"stage names {names} must be distinct")
    rope_thetas = {name: config.model.rope_theta for name, config in stages}
    if not init_from.startswith(pretrain_job.HF_PREFIX) and not os.path.isdir(
        os.path.join(init_from, "checkpoints")
    ):
        raise FileNotFoundError(
            f"--init_from={init_from} has no checkpoints/: point it at a pretraining workdir, or hf:DIR for a HF "
            "checkpoint"
        )
    source = init_from
    for name, config in stages:
        workdir = os.path.join(root, name)
        if stage_finished(workdir, config.train.steps):
            logging.info("stage %s: finished, skipped", name)
        else:
            config = config.replace(checkpoint=dataclasses.replace(config.checkpoint, init_from=source))
            logging.info(
                "stage %s: seq_len %d, rope_theta %g, from %s",
                name,
                config.data.seq_len,
                config.model.rope_theta,
                source,
            )
            outcome = train(config, workdir)
            merge_metrics(root, rope_thetas)
            if outcome != "done":
                return outcome
        source = workdir
    merge_metrics(root, rope_thetas)
    return "done"
