"""Evaluation during training: held-out loss and bits per byte per mixture component, multiple choice.

The `eval` section of a run config (`EvalConfig`) sets the interval; `Evaluator` scores the LIVE parameters of
the train state with one jitted log-prob function over `run.spec.apply_fn` on the run's mesh (batch rows
sharded like training batches, parameters in their training shardings): no second model is built or
restored. Metrics (`eval/<component>/loss`, `eval/<component>/bits_per_byte`, `eval/<task>/accuracy_<norm>`)
go to metrics.jsonl and TensorBoard through `MetricsWriter.write_scalars`.

Held-out sets: documents of each mixture component never seen in training. A "demo" component's are the
demo corpus's held-out split (`split: "heldout"`, the same `sources`); other kinds name theirs in
`eval.heldout_paths` ("component=path", read with the component's kind and fields); a name there that is
no component adds a held-out set of its own (e.g. "german=/data/german_heldout.jsonl"). Documents are packed and
masked as in training (`apertus_jax.eval.perplexity`, docs/recipe.md section 2) but without Goldfish: the
held-out loss is that of every token. Multiple choice uses the tasks of `experiments.evaluate`
(`<language>_exams_qa`), all four normalisations (docs/recipe.md section 9), questions whose options fit the
run's rows. Both score rows of `data.seq_len + 1` tokens (the packer's rows), so the scoring function
compiles once.

Preemption: the evaluator checks the SIGTERM flag before every forward pass and gives up (`None`); the loop
then saves the checkpoint of the current step, whose `evaluated_step` still names the previous eval, so the
resumed run redoes the eval of that step before training on.
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

from apertus_jax.eval import multiple_choice, perplexity, tasks
from apertus_jax.eval.config import EXAMS_QA_SUFFIX, EvalConfig
from apertus_jax.train.sharding import batch_sharding

RAW_KINDS = ("jsonl", "parquet", "text")


class EvalInterrupted(Exception):
    """SIGTERM arrived during an evaluation (the loop saves and exits; the eval is redone on resume)."""


@dataclasses.dataclass(frozen=True)
class HeldoutSet:
    """One component's held-out documents: int32 `[bod, ..., eod]` arrays and their texts' UTF-8 bytes."""

    name: str
    documents: list
    num_bytes: int


def _read_texts(path: str, kind: str, text_field: str = "text", id_field: str = "id") -> list[str]:
    from apertus_jax.data import sources

    documents = sources.iter_raw_documents(
        [path], kind, sources.RawStats(), text_field=text_field, id_field=id_field, score_field=None
    )
    return [d.text for d in documents]


def heldout_texts(name: str, spec: dict, heldout_paths: dict[str, str]) -> list[str] | None:
    """Texts of the held-out documents of component `name` (its normalized spec), or None if it has none.

    Raises:
      FileNotFoundError / ValueError: a bad `eval.heldout_paths` file (from `data.sources`).
    """
    if spec["kind"] == "demo":
        from apertus_jax.data.demo_corpus import load_demo_documents

        return [d["text"] for d in load_demo_documents("heldout", spec["sources"])]
    if name not in heldout_paths:
        return None
    if spec["kind"] not in RAW_KINDS:
        raise ValueError(
            f"eval.heldout_paths: component {name!r} is of kind {spec['kind']}; held-out files are read as "
            "jsonl, parquet or text"
        )
    return _read_texts(heldout_paths[name], spec["kind"], spec["text_field"], spec["id_field"])


def _kind_of(path: str) -> str:
    return next((kind for kind in RAW_KINDS if path.endswith(f".{kind}")), "text")


def heldout_sets(eval_config: EvalConfig, pipeline: dict, tokenizer) -> list[HeldoutSet]:
    """The held-out set of each component of the (normalized) pipeline that has one, then the extra sets
    of `eval.heldout_paths` whose names are not components (read as jsonl / parquet by the file's
    extension, else as text), each capped at `eval_config.heldout_tokens` tokens (whole documents, at
    least one)."""
    paths = dict(entry.split("=", 1) for entry in eval_config.heldout_paths)
    named = []
    for name, spec in pipeline["components"].items():
        texts = heldout_texts(name, spec, paths)
        if texts is None:
            logging.warning("eval: component %r has no held-out set (set eval.heldout_paths)", name)
            continue
        named.append((name, texts))
    named += [
        (name, _read_texts(path, _kind_of(path)))
        for name, path in paths.items()
        if name not in pipeline["components"]
    ]
    sets = []
    for name, texts in named:
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


class Evaluator:
    """Held-out sets and multiple-choice questions of a run, loaded once; `evaluate(params)` scores them.

    Args:
      run: the `apertus_jax.train.assemble.Run` (its mesh, spec, tokenizer, data and eval sections).
      should_stop: () -> bool, checked before every forward pass (the loop's SIGTERM flag).

    Raises:
      ValueError / FileNotFoundError: a bad `eval` section or held-out file; a task that cannot be loaded.
    """

    def __init__(self, run, should_stop: Callable[[], bool] = lambda: False):
        self.config: EvalConfig = run.sections.eval
        self.tokenizer = run.tokenizer
        self.seq_len = run.sections.data.seq_len
        self.batch_rows = self.config.batch_rows or run.plan.batch_tokens_at_step(0) // self.seq_len
        batch_ways = run.mesh.shape["data"] * run.mesh.shape["fsdp"]
        if self.batch_rows % batch_ways:
            raise ValueError(
                f"eval.batch_rows={self.batch_rows} must be a multiple of the data*fsdp mesh axes ({batch_ways})"
            )
        self.heldout = heldout_sets(self.config, run.sections.data.pipeline, self.tokenizer)
        self.questions = {}
        for task in self.config.tasks:
            loaded = tasks.load_exams_qa(task[: -len(EXAMS_QA_SUFFIX)])
            loaded = loaded[: self.config.task_questions] if self.config.task_questions else loaded
            self.questions[task] = fitting_questions(loaded, self.tokenizer, self.seq_len + 1)
        self._params = None
        self._should_stop = should_stop
        scoring = make_token_logprobs(run, lambda: self._params)

        def checked(*rows):
            if self._should_stop():
                raise EvalInterrupted
            return scoring(*rows)

        self._token_logprobs = checked

    def evaluate(self, params) -> dict[str, float] | None:
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
