"""The Apertus memorization study (section 5.4.1, Figure 8; App. H.1): standard vs Goldfish loss on probes
and canaries injected at controlled repetition counts.

    report = run_study(memorization_tiny.get_config(), "workdir/memorization")

`study` is a ConfigDict (`configs/studies/memorization_tiny.py`): `run` (a run config), `goldfish` (the Goldfish
settings), `prefix_lengths`, `offsets`, `suffix_len`, `top_p`, `num_candidates`, `resume_check` and `seed`.
Two runs of the trainer (`apertus_jax.jobs.pretrain.pretrain`) differ only in `data.pipeline.goldfish`: the
study's `run` (standard loss, Goldfish k = 0) and the same with the study's `goldfish` settings. Their data
pipeline injects the probe and canary components (`apertus_jax.data.memorization.injection`) at their planned counts; the
standard hook `apertus_jax.records.probe_manifest.ProbeManifest` writes `probes.json` (texts, planned repetitions,
occurrences seen) into each workdir. A workdir that already holds the finished run is reused (the trainer
resumes at its last step and has nothing left to do). With `resume_check`, a third run repeats the standard
one, stops after its first checkpoint (`StopAfterFirstCheckpoint`: the clean stop of a SIGTERM, outcome
"preempted") and is resumed; its probe exposure counts must equal the uninterrupted run's.

Then, for every probe (trained ones per repetition count and the never-seen ones), every prefix length and
offset: the model is prompted with `prefix_len` probe tokens starting at `offset` and generates
`suffix_len` tokens greedily and with nucleus sampling (T = 1.0, top-p 0.9; `apertus_jax.models.generate`),
scored against the true continuation (ROUGE-L, LCCS, exact-match length, TTR;
`apertus_jax.eval.memorization`). Canary exposure (`apertus_jax.eval.exposure`) per repetition count.
`run_study` writes into its output folder: `memorization.json` (config, per-probe scores, means, exposures,
resume check), `heatmap_<run>_<decoding>.png` (mean ROUGE-L per repetition count x prefix length, as the
report's Figure 8), `canary_exposure.png` and `memorization.md` (tables). The command line is
`python -m experiments.memorization`.
"""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Callable

import ml_collections
import numpy as np

from apertus_jax import files, plots
from apertus_jax.config.schema import parse
from apertus_jax.data.config import parse_pipeline
from apertus_jax.data.memorization.canaries import Canary
from apertus_jax.data.run_tokenizer import run_tokenizer
from apertus_jax.eval.exposure import canary_exposures
from apertus_jax.eval.memorization import exact_match_length, lccs_length, rouge_l, type_token_ratio
from apertus_jax.jobs.pretrain import RERUN, pretrain, run_training
from apertus_jax.models.generate import generate
from apertus_jax.records.probe_manifest import manifest_path
from apertus_jax.train.hooks import Hook, LoopContext
from apertus_jax.trained.workdir import load_workdir

DECODINGS = ("greedy", "nucleus")
METRICS = ("rouge_l", "lccs", "exact_match_length", "ttr")
PREEMPTED_FILE = "preempted.json"  # the resume check's interrupted run: {"outcome", "step"}


def run_configs(study: ml_collections.ConfigDict) -> dict[str, ml_collections.ConfigDict]:
    """`{run name: run config}` (copies of `study.run`): "standard" (Goldfish k = 0) and "goldfish_k<k>"
    (with "_<hash>" for another hash than "apertus"), differing only in the Goldfish settings."""
    standard = copy.deepcopy(study.run)
    goldfish = copy.deepcopy(study.run)
    standard.data.pipeline.goldfish.k = 0
    for key, value in dict(study.goldfish).items():
        goldfish.data.pipeline.goldfish[key] = value
    name = f"goldfish_k{study.goldfish['k']}"
    if study.goldfish.get("hash", "apertus") != "apertus":
        name += f"_{study.goldfish['hash']}"
    return {"standard": standard, name: goldfish}


def check_study(study: ml_collections.ConfigDict) -> None:
    """Everything the study needs, checked before anything is trained or written.

    Raises:
      ValueError: one line naming the setting: prefix/suffix/offset/candidate ranges, a missing probe or
        canary component, an invalid component spec, or probes shorter than offset + prefix + suffix.
    """
    if min(study.prefix_lengths) < 1 or study.suffix_len < 1 or min(study.offsets) < 0:
        raise ValueError(
            f"prefix_lengths={tuple(study.prefix_lengths)} and suffix_len={study.suffix_len} must be >= 1 "
            f"and offsets={tuple(study.offsets)} >= 0"
        )
    if study.num_candidates < 1:
        raise ValueError(f"num_candidates={study.num_candidates} must be >= 1 (random secrets per canary)")
    if not 0 < study.top_p <= 1:
        raise ValueError(f"top_p={study.top_p} must be in (0, 1]")
    components = parse_pipeline(study.run.data.pipeline).components
    kinds = [c.kind for c in components.values()]
    if "probes" not in kinds or "canaries" not in kinds:
        raise ValueError("run.data.pipeline.components needs a 'probes' and a 'canaries' component")
    tokenizer = run_tokenizer(study.run.data.tokenizer, study.run.data.demo_tokenizer_vocab)
    for name, spec in components.items():
        if spec.kind == "probes":
            lengths = [len(tokenizer.encode_document(t)) - 1 for t in spec.select().texts]
            check_probe_lengths(lengths, study, f"component {name!r}")


def check_probe_lengths(lengths: list[int], study: ml_collections.ConfigDict, where: str) -> None:
    """Raises ValueError unless every probe (`lengths`: tokens with BoD, without EoD) holds the longest
    prompt and its suffix: max(offsets) + max(prefix_lengths) + suffix_len tokens."""
    need = max(study.offsets) + max(study.prefix_lengths) + study.suffix_len
    if min(lengths) < need:
        raise ValueError(
            f"{where}: its shortest probe has {min(lengths)} tokens, shorter than offset + prefix + suffix = "
            f"max(offsets) + max(prefix_lengths) + suffix_len = {need}; lower offsets, prefix_lengths or "
            "suffix_len"
        )


class StopAfterFirstCheckpoint(Hook):
    """The resume check's interruption: after the run's first checkpoint (and its probe manifest, written by
    the standard hook before this one), asks the loop for the clean stop of a SIGTERM; the run ends
    "preempted" at that step and the next `train` call resumes it. `requested`: whether it asked (a
    "preempted" run it did not stop was stopped by a real SIGTERM)."""

    requested = False

    def on_save(self, step: int, context: LoopContext) -> None:
        if step > context.step:
            self.requested = True
            context.request_stop(f"resume check: stop after the checkpoint of step {step}")


def train_runs(
    study: ml_collections.ConfigDict, out: str, log: Callable[[str], None] = print
) -> dict[str, str] | None:
    """Trains (or reuses) every run of `run_configs(study)` in OUT/<name>; with `resume_check`, also
    "standard_resumed": the standard run stopped after its first checkpoint (its outcome and step recorded
    in `preempted.json`) and resumed. Returns `{name: workdir}`, or None when a SIGTERM preempted a
    run (it saved a checkpoint; no later run is started; the next call resumes it). One line per run goes to
    `log`.

    Raises:
      ValueError / FileNotFoundError / WorkdirLockedError: as `apertus_jax.jobs.pretrain.pretrain`.
      KeyboardInterrupt: a Ctrl-C stopped a run (its checkpoint saved: `apertus_jax.train.loop.train`).
    """

    def finished(name: str, outcome: str, start: float) -> bool:
        log(f"[{name}] training {outcome} in {time.time() - start:.0f}s")
        if outcome != "done":
            log(f"[{name}] {outcome}: the study stops without scoring; {RERUN}")
        return outcome == "done"

    workdirs = {}
    for name, config in run_configs(study).items():
        workdirs[name] = os.path.join(out, name)
        start = time.time()
        if not finished(name, pretrain(parse(config), workdirs[name]), start):
            return None
    if study.resume_check:
        workdir = workdirs["standard_resumed"] = os.path.join(out, "standard_resumed")
        config = parse(run_configs(study)["standard"])
        start = time.time()
        if not os.path.exists(manifest_path(workdir, 0)):
            stop = StopAfterFirstCheckpoint()
            outcome = run_training(config, workdir, hooks=[stop])
            if not (stop.requested or finished("standard_resumed", outcome, start)):
                return None  # a SIGTERM before the hook's stop
            with open(os.path.join(workdir, "metrics.jsonl")) as f:
                step = max(json.loads(line)["step"] for line in f)
            files.write_json(os.path.join(workdir, PREEMPTED_FILE), {"outcome": outcome, "step": step})
            log(f"[standard_resumed] {outcome} at step {step} (stopped after its first checkpoint); resuming")
        if not finished("standard_resumed", pretrain(config, workdir), start):
            return None
    return workdirs


def unseen_occurrences(manifest: dict) -> str | None:
    """A one-line summary of the injected documents that saw fewer occurrences than planned, or None."""
    short = [
        (name, d["repetitions"], d["exposures"])
        for name, component in manifest["components"].items()
        for d in component["documents"]
        if d["exposures"] < d["repetitions"]
    ]
    if not short:
        return None
    listed = ", ".join(f"{name} {seen}/{planned}" for name, planned, seen in short[:6])
    return (
        f"{len(short)} injected documents saw fewer occurrences than planned ({listed}"
        f"{', ...' if len(short) > 6 else ''}): train longer or lower spread_tokens"
    )


def probe_tokens(manifest: dict, tokenizer) -> list[tuple[int, np.ndarray]]:
    """`(planned repetitions, [BoD] + tokens)` of every probe of the manifest (0 = never seen)."""
    documents = manifest["components"]["probes"]["documents"]
    return [(d["repetitions"], tokenizer.encode_document(d["text"])[:-1]) for d in documents]


def score_probes(
    model,
    tokenizer,
    probes: list[tuple[int, np.ndarray]],
    study: ml_collections.ConfigDict,
    progress: Callable[[], None],
) -> list[dict]:
    """Per probe x prefix length x offset x decoding (offsets outermost, then prefix lengths, decodings,
    probes): the four memorization metrics of the `suffix_len`-token suffix the model generates after the
    `prefix_len` probe tokens at `offset`. `probes` as `probe_tokens`; `progress()` after each generation.

    Raises:
      ValueError: a probe shorter than max(offsets) + max(prefix_lengths) + suffix_len tokens.
    """
    check_probe_lengths([len(tokens) for _, tokens in probes], study, "probes")
    records = []
    for offset in study.offsets:
        for prefix_len in study.prefix_lengths:
            prompts = [tokens[offset : offset + prefix_len] for _, tokens in probes]
            references = [
                tokens[offset + prefix_len : offset + prefix_len + study.suffix_len] for _, tokens in probes
            ]
            for decoding in DECODINGS:
                sampling = dict(temperature=1.0, top_p=study.top_p) if decoding == "nucleus" else {}
                generated = generate(
                    model,
                    prompts,
                    max_new_tokens=study.suffix_len,
                    pad_id=tokenizer.pad_id,
                    seed=study.seed + offset * 1000 + prefix_len,
                    **sampling,
                )
                for index, ((repetitions, _), reference, generation) in enumerate(
                    zip(probes, references, generated)
                ):
                    records.append(
                        {
                            "probe": index,
                            "repetitions": repetitions,
                            "prefix_len": prefix_len,
                            "offset": offset,
                            "decoding": decoding,
                            "rouge_l": rouge_l(reference, generation),
                            "lccs": lccs_length(reference, generation),
                            "exact_match_length": exact_match_length(reference, generation),
                            "ttr": type_token_ratio(generation),
                        }
                    )
                progress()
    return records


def mean_table(records: list[dict], decoding: str, metric: str) -> dict:
    """`{repetitions: {prefix_len: mean metric over probes and offsets}}` for one decoding."""
    table: dict = {}
    for r in records:
        if r["decoding"] == decoding:
            table.setdefault(r["repetitions"], {}).setdefault(r["prefix_len"], []).append(r[metric])
    return {
        reps: {p: float(np.mean(v)) for p, v in sorted(row.items())} for reps, row in sorted(table.items())
    }


def canary_scores(model, tokenizer, manifest: dict, study: ml_collections.ConfigDict) -> list[dict]:
    """Exposure (bits, at most log2(num_candidates + 1)) of every canary of the manifest, with its planned
    repetitions: `[{"canary": index, "repetitions": n, "exposure": bits}]`."""
    documents = manifest["components"]["canaries"]["documents"]
    canaries = [Canary(prefix=d["prefix"], secret=d["secret"]) for d in documents]
    length = max(len(tokenizer.encode(c.text)) for c in canaries) + 8
    values = canary_exposures(
        model, tokenizer, canaries, num_candidates=study.num_candidates, seed=study.seed, seq_len=length
    )
    return [
        {"canary": i, "repetitions": d["repetitions"], "exposure": v}
        for i, (d, v) in enumerate(zip(documents, values))
    ]


def plot_heatmap(table: dict, title: str, path: str) -> None:
    """Writes the PNG at `path`: `table` (`{repetitions: {prefix_len: mean ROUGE-L in [0, 1]}}`, as
    `mean_table`) as a heatmap, repetition counts as rows (0 = never seen), prefix lengths as columns."""
    repetitions = sorted(table)
    prefixes = sorted(next(iter(table.values())))
    values = np.array([[table[r][p] for p in prefixes] for r in repetitions])
    fig = plots.figure((max(1.3 * len(prefixes) + 2, 7.0), 0.55 * len(repetitions) + 1.6))
    ax = fig.subplots()
    image = ax.imshow(values, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
    for i in range(len(repetitions)):
        for j in range(len(prefixes)):
            ax.text(
                j,
                i,
                f"{values[i, j]:.2f}",
                ha="center",
                va="center",
                color="w" if values[i, j] < 0.6 else "k",
            )
    ax.set_xticks(range(len(prefixes)), [str(p) for p in prefixes])
    ax.set_yticks(range(len(repetitions)), ["never seen" if r == 0 else str(r) for r in repetitions])
    ax.set_xlabel("prefix length (tokens)")
    ax.set_ylabel("repetitions in training")
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, label="mean ROUGE-L of the suffix")
    plots.save(fig, path, dpi=110)


def plot_exposure(results: dict, num_candidates: int, path: str) -> None:
    """Writes the PNG at `path`: the mean canary exposure (bits) per repetition count of every run of
    `results` (`{run: {"canaries": canary_scores(...)}}`), with the maximum log2(num_candidates + 1)."""
    fig = plots.figure((6, 4))
    ax = fig.subplots()
    for name, run in results.items():
        by_count: dict = {}
        for c in run["canaries"]:
            by_count.setdefault(c["repetitions"], []).append(c["exposure"])
        counts = sorted(by_count)
        ax.plot(range(len(counts)), [np.mean(by_count[c]) for c in counts], marker="o", label=name)
    ax.set_xticks(range(len(counts)), ["never seen" if c == 0 else str(c) for c in counts])
    ax.axhline(np.log2(num_candidates + 1), color="k", ls=":", lw=1, label="maximum (rank 1)")
    ax.set_xlabel("canary repetitions in training")
    ax.set_ylabel(f"mean exposure (bits, {num_candidates} candidates)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    plots.save(fig, path, dpi=110)


def markdown(report: dict) -> str:
    """The tables of a JSON-ready report of `run_study`: per run and decoding the mean ROUGE-L / exact-match
    length / TTR per repetition count x prefix length, the canary exposure per repetition count, the resume
    check, and a warning per run whose documents saw fewer occurrences than planned."""
    lines = [
        f"Memorization study: {report['seconds']:.0f} s in all (training {report['train_seconds']:.0f} s).",
        "",
    ]
    for name, run in report["runs"].items():
        if run.get("unseen_occurrences"):
            lines += [f"**Warning ({name}):** {run['unseen_occurrences']}; rows are PLANNED counts.", ""]
        for decoding in DECODINGS:
            table = run["means"][decoding]
            prefixes = sorted(next(iter(table["rouge_l"].values())), key=int)
            lines += [
                f"### {name}, {decoding}: mean ROUGE-L / exact-match length (tokens) / TTR",
                "",
                "| repetitions | " + " | ".join(f"prefix {p}" for p in prefixes) + " |",
                "| --- |" + " --- |" * len(prefixes),
            ]
            for reps in sorted(table["rouge_l"], key=int):
                cells = [
                    f"{table['rouge_l'][reps][p]:.2f} / {table['exact_match_length'][reps][p]:.1f} / "
                    f"{table['ttr'][reps][p]:.2f}"
                    for p in prefixes
                ]
                lines.append(f"| {'never seen' if int(reps) == 0 else reps} | " + " | ".join(cells) + " |")
            lines.append("")
    lines += ["### Canary exposure (bits), mean per repetition count", ""]
    names = list(report["runs"])
    lines += ["| repetitions | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    counts = sorted({c["repetitions"] for c in report["runs"][names[0]]["canaries"]})
    for count in counts:
        cells = [
            f"{np.mean([c['exposure'] for c in report['runs'][n]['canaries'] if c['repetitions'] == count]):.2f}"
            for n in names
        ]
        lines.append(f"| {'never seen' if count == 0 else count} | " + " | ".join(cells) + " |")
    if report.get("resume_check"):
        check = report["resume_check"]
        lines += [
            "",
            f"Resume check (preempted at step {check['preempted_at_step']}): probe exposure counts "
            f"{'identical' if check['identical'] else 'DIFFERENT'} to the uninterrupted run.",
        ]
    return "\n".join(lines) + "\n"


def _manifest(workdir: str) -> dict:
    with open(manifest_path(workdir, 0)) as f:
        return json.load(f)


def _exposure_counts(workdir: str) -> dict:
    manifest = _manifest(workdir)
    return {name: [d["exposures"] for d in c["documents"]] for name, c in manifest["components"].items()}


def _preempted_step(workdir: str) -> int | None:
    """The step at which the resume-check run stopped (recorded by `train_runs`)."""
    path = os.path.join(workdir, PREEMPTED_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)["step"]


def run_study(study: ml_collections.ConfigDict, out: str, log: Callable[[str], None] = print) -> dict | None:
    """The whole study (module docstring): checks `study`, trains (or reuses) the runs in OUT/<run name>,
    scores them and writes OUT/memorization.json (the returned report: config, runs, train_seconds,
    resume_check, seconds), OUT/memorization.md, the heatmaps and OUT/canary_exposure.png. Progress (one line
    per run and per generation batch, with ETA) and warnings go to `log`. A preempted run (`train_runs`)
    ends it at once: None, nothing scored or written.

    Raises:
      ValueError: a bad study setting (`check_study`), before anything is trained or written; as
        `train_runs` (a bad run config, a locked workdir).
    """
    start = time.time()
    configs = run_configs(study)
    check_study(study)
    os.makedirs(out, exist_ok=True)
    workdirs = train_runs(study, out, log=log)
    if workdirs is None:
        return None
    train_seconds = time.time() - start
    results, evaluated = {}, [0]
    total = len(configs) * len(study.offsets) * len(study.prefix_lengths) * len(DECODINGS)
    eval_start = time.time()

    def progress():
        evaluated[0] += 1
        elapsed = time.time() - eval_start
        log(
            f"  generation {evaluated[0]}/{total}, {elapsed:.0f}s, "
            f"ETA {elapsed / evaluated[0] * (total - evaluated[0]):.0f}s"
        )

    for name in configs:
        trained = load_workdir(workdirs[name])
        manifest = _manifest(workdirs[name])
        short = unseen_occurrences(manifest)
        if short:
            log(f"warning: [{name}] {short}; the tables and heatmaps label rows by the PLANNED counts")
        records = score_probes(
            trained.model, trained.tokenizer, probe_tokens(manifest, trained.tokenizer), study, progress
        )
        results[name] = {
            "step": trained.step,
            "probe_exposures": _exposure_counts(workdirs[name])["probes"],
            "probe_repetitions": [d["repetitions"] for d in manifest["components"]["probes"]["documents"]],
            "records": records,
            "means": {
                decoding: {metric: mean_table(records, decoding, metric) for metric in METRICS}
                for decoding in DECODINGS
            },
            "canaries": canary_scores(trained.model, trained.tokenizer, manifest, study),
            "unseen_occurrences": short,
        }
        for decoding in DECODINGS:
            plot_heatmap(
                results[name]["means"][decoding]["rouge_l"],
                f"{name}, {decoding}: mean ROUGE-L of a {study.suffix_len}-token suffix "
                f"(offsets {list(study.offsets)})",
                os.path.join(out, f"heatmap_{name}_{decoding}.png"),
            )
    report = {"config": study.to_dict(), "runs": results, "train_seconds": train_seconds}
    if study.resume_check:
        with open(os.path.join(workdirs["standard_resumed"], "metrics.jsonl")) as f:
            steps = [json.loads(line)["step"] for line in f]
        report["resume_check"] = {
            "uninterrupted": _exposure_counts(workdirs["standard"]),
            "resumed": _exposure_counts(workdirs["standard_resumed"]),
            "preempted_at_step": _preempted_step(workdirs["standard_resumed"]),
            "metrics_steps_contiguous": steps == list(range(1, len(steps) + 1)),
        }
        report["resume_check"]["identical"] = (
            report["resume_check"]["uninterrupted"] == report["resume_check"]["resumed"]
        )
    plot_exposure(results, study.num_candidates, os.path.join(out, "canary_exposure.png"))
    report["seconds"] = time.time() - start
    report = json.loads(json.dumps(report, default=int))  # numpy integers and int dict keys as JSON has them
    files.write_json(os.path.join(out, "memorization.json"), report, indent=1)
    files.write_text(os.path.join(out, "memorization.md"), markdown(report))
    return report
