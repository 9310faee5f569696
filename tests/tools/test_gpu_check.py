"""tools.measure.gpu_check: the accelerator check's outputs gathered into one record."""

import json

import pytest

from tools.measure import gpu_check


def write_metrics(path, losses, evals):
    with open(path, "w") as f:
        for step, loss in enumerate(losses, 1):
            f.write(json.dumps({"step": step, "loss": loss, "tokens_per_s": 100.0 * step}) + "\n")
        for loss in evals:
            f.write(
                json.dumps(
                    {
                        "step": len(losses),
                        "eval/prose/loss": loss,
                        "eval/udhr/loss": loss + 1,
                        "eval/unseen_languages/udhr/loss": loss + 2,
                        "eval/seconds": 0.5,
                    }
                )
                + "\n"
            )


def test_demo_summary_reads_the_losses_and_the_last_evaluation(tmp_path):
    path = tmp_path / "metrics.jsonl"
    losses = [8.0 - 0.1 * i for i in range(30)]
    write_metrics(path, losses, evals=[7.0, 6.0])
    summary = gpu_check.demo_summary(str(path))
    assert summary["steps"] == 30 and summary["first_loss"] == 8.0
    assert summary["final_loss"] == pytest.approx(5.1)
    assert summary["last20_mean"] == pytest.approx(sum(losses[-20:]) / 20)
    assert summary["median_tokens_per_s"] == pytest.approx(1600.0)  # steps 2..30: 200 ... 3000
    assert (summary["prose_loss"], summary["udhr_loss"], summary["unseen_languages_loss"]) == (6.0, 7.0, 8.0)


def test_check_values_gathers_every_output_and_names_a_missing_one(tmp_path):
    for name in gpu_check.CHECK_OUTPUTS:
        (tmp_path / f"{name}.json").write_text(
            json.dumps({"device_kind": "NVIDIA H200", "jax": "0.11.2", "n": name})
        )
    with pytest.raises(FileNotFoundError, match="demo_metrics.jsonl"):
        gpu_check.check_values(str(tmp_path))
    write_metrics(tmp_path / "demo_metrics.jsonl", [8.0, 7.0], evals=[6.5])
    values = gpu_check.check_values(str(tmp_path))
    assert (
        values["8b_slice_fp8"]["n"] == "8b-slice_fp8"
        and values["attention_kernels_32k"]["n"] == "attention_kernels_32k"
    )
    assert (values["device_kind"], values["jax"], values["demo"]["final_loss"]) == (
        "NVIDIA H200",
        "0.11.2",
        7.0,
    )
