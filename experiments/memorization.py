"""The Apertus memorization study (section 5.4.1, Figure 8; App. H.1): standard vs Goldfish loss on probes
and canaries injected at controlled repetition counts.

    python -m experiments.memorization --config=configs/memorization_tiny.py --out=workdir/memorization

Two runs of the trainer (`apertus_jax.train.loop.train`) that differ only in `data.pipeline.goldfish`: the
config's `run` (standard loss, Goldfish k = 0) and the same with the config's `goldfish` settings. Their data
pipeline injects the probe and canary components (`apertus_jax.data.injection`) at their planned counts and
writes `probes.json` (texts, planned repetitions, occurrences seen) into each workdir. A workdir that already
holds the finished run is reused (the trainer resumes at its last step and has nothing left to do). With
`resume_check`, a third run repeats the standard one, is sent SIGTERM after its first checkpoint and resumed;
its probe exposure counts must equal the uninterrupted run's.

Then, for every probe (trained ones per repetition count and the never-seen ones), every prefix length and
offset: the model is prompted with `prefix_len` probe tokens starting at `offset` and generates
`suffix_len` tokens greedily and with nucleus sampling (T = 1.0, top-p 0.9; `apertus_jax.models.generate`),
scored against the true continuation (ROUGE-L, LCCS, exact-match length, TTR;
`apertus_jax.eval.memorization`). Canary exposure (`apertus_jax.eval.exposure`) per repetition count.
Writes into `--out`: `memorization.json` (config, per-probe scores, means, exposures, resume check),
`heatmap_<run>_<decoding>.png` (mean ROUGE-L per repetition count x prefix length, as the report's
Figure 8), `canary_exposure.png` and `memorization.md` (tables). Progress with ETA on stdout.
"""

import copy
import json
import os
import signal
import sys
import threading
import time

import numpy as np
from absl import flags
from ml_collections import config_flags

from experiments import cli

DECODINGS = ("greedy", "nucleus")
METRICS = ("rouge_l", "lccs", "exact_match_length", "ttr")


def run_configs(study) -> dict:
    """`{run name: run config}`: "standard" and "goldfish_k<k>" (with "_<hash>" for another hash than
    "apertus"), differing only in the Goldfish settings."""
    standard = copy.deepcopy(study.run)
    goldfish = copy.deepcopy(study.run)
    standard.data.pipeline.goldfish.k = 0
    for key, value in dict(study.goldfish).items():
        goldfish.data.pipeline.goldfish[key] = value
    name = f"goldfish_k{study.goldfish['k']}"
    if study.goldfish.get("hash", "apertus") != "apertus":
        name += f"_{study.goldfish['hash']}"
    return {"standard": standard, name: goldfish}


def check_study(study) -> None:
    """Everything the study needs, checked before anything is trained or written.

    Raises:
      ValueError: one line naming the setting: prefix/suffix/offset/candidate ranges, a missing probe or
        canary component, an invalid component spec, or probes shorter than offset + prefix + suffix.
    """
    from apertus_jax.data import injection
    from apertus_jax.data.config import normalize_data_config
    from apertus_jax.train.inputs import load_run_tokenizer

    if min(study.prefix_lengths) < 1 or study.suffix_len < 1 or min(study.offsets) < 0:
        raise ValueError(
            f"prefix_lengths={tuple(study.prefix_lengths)} and suffix_len={study.suffix_len} must be >= 1 "
            f"and offsets={tuple(study.offsets)} >= 0"
        )
    if study.num_candidates < 1:
        raise ValueError(f"num_candidates={study.num_candidates} must be >= 1 (random secrets per canary)")
    if not 0 < study.top_p <= 1:
        raise ValueError(f"top_p={study.top_p} must be in (0, 1]")
    components = normalize_data_config(study.run.data.pipeline)["components"]
    kinds = [c["kind"] for c in components.values()]
    if "probes" not in kinds or "canaries" not in kinds:
        raise ValueError("run.data.pipeline.components needs a 'probes' and a 'canaries' component")
    tokenizer = load_run_tokenizer(study.run.data)
    for name, spec in components.items():
        if spec["kind"] == "probes":
            lengths = [len(tokenizer.encode_document(t)) - 1 for t in injection.select(spec).texts]
            check_probe_lengths(lengths, study, f"component {name!r}")


def check_probe_lengths(lengths, study, where: str) -> None:
    """Raises ValueError unless every probe (`lengths`: tokens with BoD, without EoD) holds the longest
    prompt and its suffix: max(offsets) + max(prefix_lengths) + suffix_len tokens."""
    need = max(study.offsets) + max(study.prefix_lengths) + study.suffix_len
    if min(lengths) < need:
        raise ValueError(
            f"{where}: its shortest probe has {min(lengths)} tokens, shorter than offset + prefix + suffix = "
            f"max(offsets) + max(prefix_lengths) + suffix_len = {need}; lower offsets, prefix_lengths or "
            "suffix_len"
        )


def _preempt_after_first_checkpoint(workdir: str, stop: threading.Event) -> None:
    """Sends this process SIGTERM once the run in `workdir` wrote its first probe manifest (a checkpoint)."""
    path = os.path.join(workdir, "probes.json")
    while not stop.is_set():
        if os.path.exists(path):
            os.kill(os.getpid(), signal.SIGTERM)
            return
        time.sleep(0.2)


def train_runs(study, out: str, log=print) -> dict:
    """Trains (or reuses) every run; returns `{name: workdir}` and, with `resume_check`, "standard_resumed"."""
    from apertus_jax.train.loop import train

    workdirs = {}
    for name, config in run_configs(study).items():
        workdirs[name] = os.path.join(out, name)
        start = time.time()
        outcome = train(config, workdirs[name])
        log(f"[{name}] training {outcome} in {time.time() - start:.0f}s")
    if study.resume_check:
        workdir = workdirs["standard_resumed"] = os.path.join(out, "standard_resumed")
        config = run_configs(study)["standard"]
        if not os.path.exists(os.path.join(workdir, "probes.json")):
            stop = threading.Event()
            watcher = threading.Thread(
                target=_preempt_after_first_checkpoint, args=(workdir, stop), daemon=True
            )
            watcher.start()
            outcome = train(config, workdir)
            stop.set()
            with open(os.path.join(workdir, "metrics.jsonl")) as f:
                step = max(json.loads(line)["step"] for line in f)
            with open(os.path.join(workdir, "preempted.json"), "w") as f:
                json.dump({"outcome": outcome, "step": step}, f)
            log(f"[standard_resumed] {outcome} at step {step} (SIGTERM); resuming")
        outcome = train(config, workdir)
        log(f"[standard_resumed] training {outcome}")
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


def score_probes(model, tokenizer, probes, study, progress) -> list[dict]:
    """Per probe x prefix length x offset x decoding: the four memorization metrics of the suffix."""
    from apertus_jax.eval.memorization import exact_match_length, lccs_length, rouge_l, type_token_ratio
    from apertus_jax.models.generate import generate

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


def canary_scores(model, tokenizer, manifest: dict, study) -> list[dict]:
    """Exposure of every canary of the manifest, with its planned repetitions."""
    from apertus_jax.data.canaries import Canary
    from apertus_jax.eval.exposure import canary_exposures

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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    repetitions = sorted(table)
    prefixes = sorted(next(iter(table.values())))
    values = np.array([[table[r][p] for p in prefixes] for r in repetitions])
    fig, ax = plt.subplots(figsize=(max(1.3 * len(prefixes) + 2, 7.0), 0.55 * len(repetitions) + 1.6))
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
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=110)
    plt.close(fig)
    os.replace(path + ".tmp.png", path)


def plot_exposure(results: dict, num_candidates: int, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
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
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=110)
    plt.close(fig)
    os.replace(path + ".tmp.png", path)


def markdown(report: dict) -> str:
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
            f"Resume check (SIGTERM at step {check['preempted_at_step']}): probe exposure counts "
            f"{'identical' if check['identical'] else 'DIFFERENT'} to the uninterrupted run.",
        ]
    return "\n".join(lines) + "\n"


def _exposure_counts(workdir: str) -> dict:
    with open(os.path.join(workdir, "probes.json")) as f:
        manifest = json.load(f)
    return {name: [d["exposures"] for d in c["documents"]] for name, c in manifest["components"].items()}


def main(argv) -> None:
    del argv
    from apertus_jax.eval.workdir import load_workdir
    from apertus_jax.train.checkpoint import WorkdirLockedError

    study, out = _CONFIG.value, _OUT.value
    start = time.time()
    try:
        configs = run_configs(study)
        check_study(study)
        os.makedirs(out, exist_ok=True)
        workdirs = train_runs(study, out, log=lambda line: print(line, flush=True))
    except (ValueError, OSError, WorkdirLockedError) as error:
        print("error: " + " ".join(str(error).split()), file=sys.stderr)
        sys.exit(2)
    train_seconds = time.time() - start
    results, evaluated = {}, [0]
    total = len(configs) * len(study.offsets) * len(study.prefix_lengths) * len(DECODINGS)
    eval_start = time.time()

    def progress():
        evaluated[0] += 1
        elapsed = time.time() - eval_start
        print(
            f"  generation {evaluated[0]}/{total}, {elapsed:.0f}s, ETA {elapsed / evaluated[0] * (total - evaluated[0]):.0f}s",
            flush=True,
        )

    for name in configs:
        trained = load_workdir(workdirs[name])
        with open(os.path.join(workdirs[name], "probes.json")) as f:
            manifest = json.load(f)
        short = unseen_occurrences(manifest)
        if short:
            print(
                f"warning: [{name}] {short}; the tables and heatmaps label rows by the PLANNED counts",
                flush=True,
            )
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
    path = os.path.join(out, "memorization.json")
    with open(path + ".tmp", "w") as f:
        json.dump(json.loads(json.dumps(report, default=int)), f, indent=1)
    os.replace(path + ".tmp", path)
    summary = markdown(json.loads(json.dumps(report, default=int)))
    with open(os.path.join(out, "memorization.md"), "w") as f:
        f.write(summary)
    print(summary)
    print(f"wrote {out}/memorization.json, memorization.md and the PNGs in {report['seconds']:.0f}s")


def _preempted_step(workdir: str) -> int | None:
    """The step at which the resume-check run stopped on SIGTERM (recorded by `train_runs`)."""
    path = os.path.join(workdir, "preempted.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)["step"]


def _define_flags() -> None:
    """The command-line flags, defined only when this module runs as the command (tests import it
    beside other experiments whose flags have the same names)."""
    global _CONFIG, _OUT
    _CONFIG = config_flags.DEFINE_config_file(
        "config", "configs/memorization_tiny.py", "Study config (Python)."
    )
    _OUT = flags.DEFINE_string(
        "out", "workdir/memorization", "Output directory: the runs' workdirs and results."
    )


if __name__ == "__main__":
    _define_flags()
    cli.run_absl(main)
