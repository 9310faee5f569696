"""Evaluation during training, as a loop hook: held-out loss and bits per byte per component, multiple choice.

The `eval` section of a run config (`EvalConfig`) sets the interval; `InLoopEvaluation` (a
`apertus_jax.train.hooks.Hook`) scores the LIVE parameters of the train state with one jitted log-prob function
over `run.spec.apply_fn` on the run's mesh (batch rows sharded like training batches, parameters in their
training shardings): no second model is built or restored. Metrics (`eval/<component>/loss`, `eval/<component>/bits_per_byte`, `eval/<task>/accuracy_<norm>`)
go to metrics.jsonl and TensorBoard through `MetricsWriter.write_scalars`.

Held-out sets: documents of each mixture component never seen in training (`DocumentSpec.heldout_texts`). A
"demo" component's are the demo corpus's held-out split (the same `sources`): text of the training languages;
raw kinds name theirs in `eval.heldout_paths` ("component=path", read with the component's kind and fields); a
name there that is no component adds a held-out set of its own (e.g. "german=/data/german_heldout.jsonl").
Text in languages the component never trains on (`DocumentSpec.unseen_language_texts`: a "demo" component's
UDHR translations held out whole) is scored as its own set, `eval/unseen_languages/<component>/...`, which
measures transfer (or forgetting), not learning, and is left out of aggregate held-out losses
(`apertus_jax.studies.ablations.compare`). The log names the sets scored, each file of `eval.heldout_paths`
with its set (`describe_sets`), and warns of a component whose text no set scores (`HeldoutTexts.not_scored`). Each set keeps its first documents up to `eval.heldout_tokens`. Documents are packed and
masked as in training (`apertus_jax.eval.perplexity`, docs/recipe.md section 2) but without Goldfish: the
held-out loss is that of every token. Multiple choice uses the tasks of `experiments.evaluate`
(`<language>_exams_qa`), all four normalisations (docs/recipe.md section 9), questions whose options fit the
run's rows. Both score rows of `data.seq_len + 1` tokens (the packer's rows), so the scoring function
compiles once.

Preemption: the evaluation checks the loop's SIGTERM flag before every forward pass and gives up (`None`); the
loop then saves the checkpoint of the current step, whose `evaluated_step` still names the previous eval, so
the resumed run redoes the eval of that step before training on.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from apertus_jax.data import sources
from apertus_jax.data.config import PipelineSpec
from apertus_jax.eval import multiple_choice, perplexity, tasks
from apertus_jax.eval.config import EXAMS_QA_SUFFIX, UNSEEN_LANGUAGES, EvalConfig
from apertus_jax.logs import counted
from apertus_jax.train.hooks import Hook, LoopContext
from apertus_jax.train.train_state import batch_sharding


class EvalInterrupted(Exception):
    """SIGTERM arrived during an evaluation (the loop saves and exits; the eval is redone on resume)."""


@dataclasses.dataclass(frozen=True)
class HeldoutSet:
    """One component's held-out documents: int32 `[bod, ..., eod]` arrays and their texts' UTF-8 bytes."""

    name: str
    documents: list
    num_bytes: int


def _kind_of(path: str) -> str:
    return next((kind for kind in sources.RAW_KINDS if path.endswith(f".{kind}")), "text")


def read_texts(path: str) -> list[str]:
    """Texts of a held-out file (kind by its extension: jsonl, parquet, else plain text).

    Raises:
      FileNotFoundError / ValueError: as `apertus_jax.data.sources.iter_raw_documents`.
    """
    documents = sources.iter_raw_documents([path], _kind_of(path), sources.RawStats(), score_field=None)
    return [d.text for d in documents]


@dataclasses.dataclass(frozen=True)
class HeldoutTexts:
    """The held-out texts of a run, by set: `heldout` [(name, texts)] of the training languages (each document
    component's own, then the extra sets of `eval.heldout_paths`), `unseen` [(name, texts)] of languages it
    never trains on (named `unseen_languages/<component>`), and `missing`: the document components that have
    no held-out set."""

    heldout: list[tuple[str, list[str]]]
    unseen: list[tuple[str, list[str]]]
    missing: list[str]

    def named_missing(self, pipeline: PipelineSpec) -> str:
        """The components of `pipeline` without a held-out set (`missing`) with their kinds: "'text'
        (arrayrecord)"; "" when there are none."""
        return ", ".join(f"{name!r} ({pipeline.components[name].kind})" for name in self.missing)

    def not_scored(self, pipeline: PipelineSpec) -> str:
        """The warning naming the components without a held-out set, whose text no set scores: "not scored:
        'text' (arrayrecord), with no held-out set of its own and no file of it in eval.heldout_paths"."""
        return (
            f"not scored: {self.named_missing(pipeline)}, with no held-out set of its own and no file of it in "
            "eval.heldout_paths"
        )


def heldout_texts(eval_config: EvalConfig, pipeline: PipelineSpec | None) -> HeldoutTexts:
    """The held-out texts of each document component of `pipeline` (`DocumentSpec.heldout_texts`, with its
    file of `eval.heldout_paths`), of the extra sets of `eval.heldout_paths` whose names are not components,
    and of each component's unseen languages. A run that does not read `data.pipeline` (a job's own batch
    source) passes None: the extra sets alone.

    Raises:
      FileNotFoundError / ValueError: a bad `eval.heldout_paths` file, or one given for a kind that reads no
        held-out file.
    """
    paths = dict(entry.split("=", 1) for entry in eval_config.heldout_paths)
    mixed = pipeline.mixed() if pipeline is not None else {}
    components = pipeline.components if pipeline is not None else {}
    heldout, missing = [], []
    for name, spec in mixed.items():
        try:
            texts = spec.heldout_texts(paths.get(name))
        except ValueError as error:
            raise ValueError(f"eval.heldout_paths: component {name!r}: {error}") from None
        if texts is None:
            missing.append(name)
        else:
            heldout.append((name, texts))
    heldout += [(name, read_texts(path)) for name, path in paths.items() if name not in components]
    unseen = [(f"{UNSEEN_LANGUAGES}/{name}", spec.unseen_language_texts()) for name, spec in mixed.items()]
    return HeldoutTexts(heldout, [(name, texts) for name, texts in unseen if texts], missing)


def heldout_sets(eval_config: EvalConfig, pipeline: PipelineSpec | None, tokenizer) -> list[HeldoutSet]:
    """The held-out sets of `heldout_texts` (a warning names the components without one,
    `HeldoutTexts.not_scored`), the held-out ones first, then the unseen-language ones, each capped at
    `eval_config.heldout_tokens` tokens (whole documents, at least one).

    Raises:
      FileNotFoundError / ValueError: as `heldout_texts`.
    """
    found = heldout_texts(eval_config, pipeline)
    if found.missing:
        logging.warning("eval: %s", found.not_scored(pipeline))
    sets = []
    for name, texts in found.heldout + found.unseen:
        documents, num_bytes, tokens = [], 0, 0
        for text in texts:
            document = tokenizer.encode_document(text)
            if documents and tokens + len(document) > eval_config.heldout_tokens:
                break
            documents.append(document)
            num_bytes += len(text.encode("utf-8"))
            tokens += len(document)
        if documents:
            sets.append(HeldoutSet(name, documents, num_bytes))
    return sets


def describe_sets(sets: list[HeldoutSet], eval_config: EvalConfig) -> str:
    """The held-out sets of a run as its log names them: each set's name, with its file where
    `eval.heldout_paths` names one ("1 held-out set: heldout (/data/heldout.jsonl)"; "no held-out set")."""
    if not sets:
        return "no held-out set"
    paths = dict(entry.split("=", 1) for entry in eval_config.heldout_paths)
    named = [f"{s.name} ({paths[s.name]})" if s.name in paths else s.name for s in sets]
    return f"{counted(len(sets), 'held-out set')}: {', '.join(named)}"


def fitting_questions(
    questions: list, tokenizer, seq_len: int
) -> list[multiple_choice.MultipleChoiceQuestion]:
    """The questions whose every option leaves room for at least one context token in a `seq_len` row."""
    return [
        q
        for q in questions
        if all(len(option) < seq_len for _, option in multiple_choice.option_requests(tokenizer, q))
    ]


def make_token_logprobs(run, params_fn: Callable[[], object]) -> Callable:
    """A `TokenLogprobsFn` (`apertus_jax.eval.scoring`) over the run's model and the parameters that
    `params_fn()` returns at call time, jitted on the run's mesh: rows sharded over ("data", "fsdp") like
    training batches, parameters in their training shardings, log-probs `[B, T-1]` float32 replicated."""
    rows_sharding = batch_sharding(run.mesh)
    apply_fn = run.spec.apply_fn

    @functools.partial(
        jax.jit,
        in_shardings=(run.spec.shardings["params"], rows_sharding, rows_sharding, rows_sharding),
        out_shardings=NamedSharding(run.mesh, P()),
    )
    def token_logprobs(params, tokens_BxT, positions_BxT, segment_ids_BxT):
        logits_BxTxV = apply_fn(params, tokens_BxT, positions_BxT, segment_ids_BxT)[:, :-1].astype(
            jnp.float32
        )
        picked_BxT = jnp.take_along_axis(logits_BxTxV, tokens_BxT[:, 1:, None], axis=-1)[..., 0]
        return picked_BxT - jax.nn.logsumexp(logits_BxTxV, axis=-1)

    def call(tokens, positions, segment_ids):
        arrays = [
            jax.make_array_from_callback(a.shape, rows_sharding, lambda index, a=a: a[index])
            for a in (np.asarray(tokens, np.int32), np.asarray(positions, np.int32), np.asarray(segment_ids))
        ]
        with jax.set_mesh(run.mesh):
            return np.asarray(token_logprobs(params_fn(), *arrays))

    return call


class InLoopEvaluation(Hook):
    """The loop hook that scores held-out sets and multiple-choice questions every `eval.every_steps` steps
    and after the last one (module docstring); sets and questions are loaded once, when the loop starts.

    Args:
      config: the `eval` section.
      pipeline: the run's typed pipeline (its components' held-out sets); None for a run on a job's own batch
        source (the `eval.heldout_paths` sets and the tasks only).

    Raises (from `on_save` when the loop starts):
      ValueError / FileNotFoundError: a bad held-out file, a task that cannot be loaded, `eval.batch_rows`
        not a multiple of the data*fsdp mesh axes.
    """

    def __init__(self, config: EvalConfig, pipeline: PipelineSpec | None):
        self.config, self.pipeline = config, pipeline
        self.every_steps = config.every_steps
        self._params = self._context = None

    def on_save(self, step: int, context: LoopContext) -> None:
        """Loads the held-out sets and the questions once per loop, when it starts (`step == context.step`)."""
        if step != context.step or self._context is context:
            return
        self._context = context
        run = context.run
        self.tokenizer = run.tokenizer
        self.seq_len = run.config.data.seq_len
        self.batch_rows = self.config.batch_rows or run.plan.batch_tokens_at_step(0) // self.seq_len
        batch_ways = run.mesh.shape["data"] * run.mesh.shape["fsdp"]
        if self.batch_rows % batch_ways:
            raise ValueError(
                f"eval.batch_rows={self.batch_rows} must be a multiple of the data*fsdp mesh axes ({batch_ways})"
            )
        logging.info("eval: loading the held-out sets and the tasks %s", list(self.config.tasks))
        start = time.time()
        self.heldout = heldout_sets(self.config, self.pipeline, self.tokenizer)
        self.questions = {}
        for task in self.config.tasks:
            loaded = tasks.load_exams_qa(task[: -len(EXAMS_QA_SUFFIX)])
            loaded = loaded[: self.config.task_questions] if self.config.task_questions else loaded
            self.questions[task] = fitting_questions(loaded, self.tokenizer, self.seq_len + 1)
        logging.info(
            "eval: %s; %s; ready in %.1f s",
            describe_sets(self.heldout, self.config),
            counted(sum(map(len, self.questions.values())), "question"),
            time.time() - start,
        )
        scoring = make_token_logprobs(run, lambda: self._params)
        should_stop = context.should_stop

        def checked(*rows):
            if should_stop():
                raise EvalInterrupted
            return scoring(*rows)

        self._token_logprobs = checked

    def on_step(self, step: int, params, context: LoopContext) -> dict[str, float] | None:
        """`{"eval/<component>/loss": nats per token, ".../bits_per_byte", ".../tokens", "eval/<task>/
        accuracy_<norm>", ".../chance", ".../questions", "eval/seconds"}` of `params`, or None when SIGTERM
        arrived (nothing is recorded; the loop saves and the resumed run redoes this eval)."""
        start = time.time()
        self._params = params
        record = {}
        try:
            for heldout in self.heldout:
                result = perplexity.perplexity(
                    self._token_logprobs,
                    heldout.documents,
                    seq_len=self.seq_len,
                    batch_size=self.batch_rows,
                    eod_id=self.tokenizer.eod_id,
                    pad_id=self.tokenizer.pad_id,
                    num_bytes=heldout.num_bytes,
                )
                record[f"eval/{heldout.name}/loss"] = result.nll_per_token
                record[f"eval/{heldout.name}/bits_per_byte"] = result.bits_per_byte
                record[f"eval/{heldout.name}/tokens"] = result.num_tokens
            for task, questions in self.questions.items():
                if not questions:
                    continue
                mc = multiple_choice.evaluate_multiple_choice(
                    self._token_logprobs,
                    self.tokenizer,
                    questions,
                    seq_len=self.seq_len + 1,  # the held-out rows' length: one compiled shape
                    batch_size=self.batch_rows,
                )
                for key, value in mc.summary().items():
                    record[f"eval/{task}/{key.replace('num_questions', 'questions')}"] = value
        except EvalInterrupted:
            return None
        finally:
            self._params = None
        record["eval/seconds"] = time.time() - start
        return record
