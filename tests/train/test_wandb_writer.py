"""Optional W&B logging in offline mode: the offline run files, read back with wandb's own reader
(`wandb leet inspect --json`, its Go core run from this process), hold the metrics.jsonl values; a resumed run continues the same run id."""

import json
import os
import sys

import pytest

from apertus_jax.train import metrics as metrics_lib
from configs.runs import tiny_resume

from ..conftest import train

wandb = pytest.importorskip("wandb")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")


def offline_runs(workdir: str, capfd) -> list[dict]:
    """Per offline run directory (oldest first): {"run_id", "history": {step: {key: value}}}."""
    from wandb.cli.leet import launch_inspect

    root = os.path.join(workdir, "wandb")
    runs = []
    for name in sorted(n for n in os.listdir(root) if n.startswith("offline-run-")):
        capfd.readouterr()
        with pytest.raises(SystemExit) as stop:
            launch_inspect(os.path.join(root, name), json_output=True)
        out = capfd.readouterr().out
        assert stop.value.code == 0, out[-2000:]
        records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        (run,) = [r["run"] for r in records if r["type"] == "run"]
        history = {
            int(r["history"]["step"]["num"]): r["history"]["item"] for r in records if r["type"] == "history"
        }
        runs.append({"run_id": run["run_id"], "history": history})
    return runs


def read_metrics(workdir: str) -> dict[int, dict]:
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return {r["step"]: r for r in map(json.loads, f)}


RECORDS = [
    {
        "step": s,
        "loss": 7.0 / s,
        "lr": 1e-3 * s,
        "grad_norm": 0.1 + s,
        "tokens_per_s": 100.0,
        "mfu": 0.01,
        "skipped_steps": 0,
    }
    for s in range(1, 5)
]


@pytest.mark.slow
def test_metrics_writer_logs_every_scalar_and_a_restart_keeps_the_run_id(tmp_path, capfd):
    workdir = str(tmp_path)
    writer = metrics_lib.MetricsWriter(workdir, 4, 0, wandb_project="apertus-test")
    for record in RECORDS[:3]:
        writer.write(record)
    writer.close()
    first_id = (tmp_path / metrics_lib.RUN_ID_FILE).read_text().strip()
    writer = metrics_lib.MetricsWriter(workdir, 4, 3, wandb_project="apertus-test")
    writer.write(RECORDS[3])
    writer.close()
    runs = offline_runs(workdir, capfd)
    assert [r["run_id"] for r in runs] == [first_id, first_id]
    assert sorted(runs[0]["history"]) == [1, 2, 3] and sorted(runs[1]["history"]) == [4]
    for run in runs:
        for step, item in run["history"].items():
            expected = {f"train/{k}": v for k, v in RECORDS[step - 1].items() if k != "step"}
            assert {k: item[k] for k in expected} == expected


def test_without_a_project_nothing_of_wandb_is_written(tmp_path):
    writer = metrics_lib.MetricsWriter(str(tmp_path), 4, 0)
    writer.write(RECORDS[0])
    writer.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl", "tensorboard"]


def test_missing_wandb_package_is_one_clear_error(monkeypatch):
    config = tiny_resume.get_config()
    metrics_lib.check_wandb_config(config.metrics)  # off: never imports wandb
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError
    metrics_lib.check_wandb_config(config.metrics)
    with config.unlocked():
        config.metrics.wandb_project = "p"
    with pytest.raises(ValueError, match="metrics.wandb_project='p' needs the wandb package"):
        metrics_lib.check_wandb_config(config.metrics)


class Crash(Exception):
    """Stands in for kill -9 after a step's metrics line, before that step's checkpoint."""


@pytest.mark.slow
def test_demo_run_history_equals_metrics_jsonl_across_a_crash(tmp_path, monkeypatch, capfd):
    """The tiny demo run logs to W&B offline, dies after step 3 (checkpoint at 2) and is resumed: both
    processes log to one run id, and every W&B history value equals metrics.jsonl at that step (the
    resume recomputes step 3 bit for bit, so W&B's copy from the first attempt is the same)."""
    workdir = str(tmp_path)
    config = tiny_resume.get_config()
    with config.unlocked():
        config.train.steps = 4
        config.metrics.wandb_project = "apertus-test"
    write = metrics_lib.MetricsWriter.write

    def write_then_crash(self, record, **kwargs):
        write(self, record, **kwargs)
        if record["step"] == 3:
            raise Crash()

    monkeypatch.setattr(metrics_lib.MetricsWriter, "write", write_then_crash)
    with pytest.raises(Crash):
        train(config, workdir)
    monkeypatch.setattr(metrics_lib.MetricsWriter, "write", write)
    assert train(config, workdir) == "done"

    metrics = read_metrics(workdir)
    assert sorted(metrics) == list(range(1, 5))
    runs = offline_runs(workdir, capfd)
    assert len(runs) == 2 and runs[0]["run_id"] == runs[1]["run_id"]
    assert sorted(runs[0]["history"]) == [1, 2, 3] and sorted(runs[1]["history"]) == [3, 4]
    for run in runs:
        for step, item in run["history"].items():
            for key in ("loss", "lr", "grad_norm", "tokens", "goldfish_dropped_fraction", "skipped_steps"):
                assert item[f"train/{key}"] == metrics[step][key], (step, key)
