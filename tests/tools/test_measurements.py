"""The measurement registry: names selected by --only, and documented commands that name what exists."""

import os
import shlex
import subprocess

import pytest

from apertus_jax.data.demo_corpus import load_demo_documents, load_udhr, udhr_languages
from apertus_jax.tokenizers.report import write_fairness_report
from tools.measure import measurements, results
from tools.measure.measurements import MEASUREMENTS, REPO, selected


def test_only_selects_in_registry_order_and_rejects_unknown_names():
    assert selected(None) == selected([]) == list(MEASUREMENTS)
    assert list(MEASUREMENTS)[:3] == ["demo", "posttrain", "evaluation"]
    assert selected(["evaluation", "demo"]) == ["demo", "evaluation"]
    with pytest.raises(ValueError, match=f"no measurement nope; known: {', '.join(MEASUREMENTS)}$"):
        selected(["demo", "nope"])


@pytest.mark.parametrize("name", list(MEASUREMENTS))
def test_measured_commands_name_existing_modules_and_configs(name):
    measurement = MEASUREMENTS[name]
    assert set(measurement.deterministic) and len(set(measurement.deterministic)) == len(
        measurement.deterministic
    )
    for line in measurement.command.splitlines():
        if line.startswith("(cd /tmp && "):
            continue  # a shell step that fetches into the scratch directory (tokenizer_fairness: npm pack)
        argv = shlex.split(line.split("  #")[0])
        assert argv[0] == "python" and argv[1] in ("-m", "-c"), line
        if argv[1] == "-m":
            module = os.path.join(REPO, *argv[2].split("."))
            assert os.path.isfile(module + ".py") or os.path.isfile(module + "/__main__.py"), line
        for arg in argv[3:]:
            if arg.startswith("--config="):
                assert os.path.isfile(os.path.join(REPO, arg.split("=", 1)[1].partition(":")[0])), line


def test_measure_all_writes_the_results_file_and_rewrites_the_bound_figures(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "README.md").write_text("x is 0<!-- result fake.x:.1f --> (y 0<!-- result fake.y -->)\n")
    subprocess.run(["git", "-C", str(tmp_path), "add", "README.md"], check=True)
    git_user = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "-C", str(tmp_path), *git_user, "commit", "-qm", "a"], check=True)
    scratches = []

    def fake(root, scratch):
        scratches.append(scratch)
        assert root == str(tmp_path) and os.listdir(scratch) == []
        return {"x": 1.5 * len(scratches), "y": "yes"}

    monkeypatch.setitem(
        measurements.MEASUREMENTS, "fake", measurements.Measurement("python -m fake", fake, ("x",))
    )
    assert measurements.measure_all(str(tmp_path), ["fake"]) == [str(tmp_path / "README.md")]
    assert (
        tmp_path / "README.md"
    ).read_text() == "x is 1.5<!-- result fake.x:.1f --> (y yes<!-- result fake.y -->)\n"
    first = results.read_result(str(tmp_path), "fake")
    assert first["command"] == "python -m fake" and first["values"] == {"x": 1.5, "y": "yes"}
    assert not os.path.exists(scratches[0])  # the scratch directory is removed
    assert measurements.changed_deterministic("fake", first, {"x": 1.5, "y": "no"}) == []
    assert measurements.changed_deterministic("fake", first, {"x": 3.0, "y": "yes"}) == ["x 1.5 -> 3.0"]
    assert measurements.changed_deterministic("fake", None, {"x": 3.0}) == []
    measurements.measure_all(str(tmp_path), ["fake"])
    assert "x is 3.0<!--" in (tmp_path / "README.md").read_text()
    assert measurements.measure_all(str(tmp_path), []) == []  # --rewrite_only: nothing changes


def test_tokenizer_value_names():
    assert measurements.tokenizer_value_name("llama3.1") == "llama3_1"
    assert measurements.tokenizer_value_name("sentencepiece:bpe32k_demo.model") == "bpe32k_demo"
    assert measurements.tokenizer_value_name("BPE 32k, demo corpus") == "BPE_32k__demo_corpus"


def test_fairness_values_read_the_report_as_written(tmp_path):
    printed = []
    langs = ["eng", "deu_1996", "rus", "cmn_hans", "065"]  # 065: a UDHR code that looks like a number
    rows = write_fairness_report(
        str(tmp_path),
        load_udhr(),
        udhr_languages(),
        load_demo_documents,
        languages=langs,
        bpe_vocab_size=0,
        log=printed.append,
    )
    values = measurements.fairness_values(str(tmp_path))
    assert values["translations"] == 5 and values["scripts"] == 3
    assert values["latin_translations"] == 3 and values["non_latin_translations"] == 2
    assert values["gini_ranking"] == "tekken" and set(values["tokenizer_seconds"]) == {"tekken"}
    tekken = values["tekken"]
    assert tekken["gini"] == rows[0]["gini"] and tekken["vocab_size"] == rows[0]["vocab_size"]
    assert tekken["max_parity_lang"] == rows[0]["max_parity_lang"] and tekken["translations"] == 5
    assert values["by_script"]["Latin"]["translations"] == 3 and "tekken" in values["by_script"]["Han"]
    assert 0 < values["text_gini"]["chars"] < 1
    cheapest = values["tekken_cheapest"]
    assert list(cheapest) == ["1", "2", "3", "4", "5"] and "065" in {r["lang"] for r in cheapest.values()}
    assert [r["tokens"] for r in cheapest.values()] == sorted(r["tokens"] for r in cheapest.values())
    (logged,) = (line for line in printed if line.startswith("tekken: Gini "))
    assert values["tokenizer_seconds"]["tekken"] == float(logged.rsplit(", ", 1)[1].removesuffix(" s"))
    with pytest.raises(FileNotFoundError):
        measurements.fairness_values(str(tmp_path / "none"))


def test_the_targets_table_gives_gb_against_hbm_and_names_a_refusal():
    fits = {
        "devices": 4,
        "mesh": "1x4x1",
        "microbatches": 512,
        "rows": 4,
        "params_gb": 8.05,
        "optimizer_gb": 24.16,
    }
    fits |= {"temps_gb": 33.74, "total_gb": 66.0, "hbm_gb": 95.0, "fits": True, "kernels": "splash_mha_fwd"}
    refused = {**fits, "temps_gb": None, "total_gb": None, "fits": False, "kernels": ""}
    refused["oom"] = (
        "RESOURCE_EXHAUSTED: Allocation (size=8388608) would exceed memory (size=1048576) :: #allocation3 "
        "[shape = 'u8[8388608]{0}', space=smem, size = 0x800000, scoped]"
    )
    values = {name: fits for name, *_ in measurements.APERTUS_TARGETS}
    values["8b_v5p_8"] = {**fits, "est_step_seconds": 335.6, "est_mfu": 0.7028}
    values["8b_262k_v5p_16"] = refused
    values["8b_h100_1x4"] = {**fits, "kernels": "__cudnn$fmhaScaleBiasSoftmax"}
    rows = {row.split(" | ")[0] + " " + row.split(" | ")[1]: row for row in
            measurements.render_apertus_targets(values).splitlines()[2:]}  # fmt: skip
    assert len(rows) == len(measurements.APERTUS_TARGETS)  # one row per run and target
    assert (
        rows["| 8B v5p-8"]
        == "| 8B | v5p-8 | 1x4x1 | 512 x 4 | 8.1 | 24.2 | 33.7 | 66.0 / 95 | splash | 336 | 70% |"
    )
    assert rows["| 8B h100:1x4"].endswith("| 66.0 / 95 | cuDNN |  |  |")
    assert rows["| 8B at 262k v5p-16"].endswith("|  | refused: 8 MiB > 1 MiB of SMEM |  |  |  |")
