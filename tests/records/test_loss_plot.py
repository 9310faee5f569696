"""The loss-curve hook: loss.png from metrics.jsonl, once the last step is checkpointed, labelled with what the
loss is."""

import json

from apertus_jax import plots
from apertus_jax.records import loss_plot


def test_plot_loss_draws_the_training_records(tmp_path):
    with open(tmp_path / "metrics.jsonl", "w") as f:
        for step in range(1, 41):
            f.write(json.dumps({"step": step, "loss": 5.0 / step}) + "\n")
        f.write(json.dumps({"step": 40, "eval/demo/loss": 1.0}) + "\n")  # an eval record has no "loss"
    png = tmp_path / loss_plot.FILE
    loss_plot.plot_loss(str(tmp_path / "metrics.jsonl"), str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loss.png", "metrics.jsonl"]  # no temporary left


def test_the_curve_is_labelled_with_what_the_loss_is(tmp_path, monkeypatch):
    with open(tmp_path / "metrics.jsonl", "w") as f:
        f.writelines(json.dumps({"step": step, "loss": 5.0 / step}) + "\n" for step in range(1, 5))
    drawn = []
    monkeypatch.setattr(
        plots, "save", lambda fig, path: drawn.append((fig.axes[0].get_ylabel(), fig.axes[0].get_title()))
    )
    loss_plot.plot_loss(str(tmp_path / "metrics.jsonl"), str(tmp_path / "a.png"))
    loss_plot.plot_loss(
        str(tmp_path / "metrics.jsonl"), str(tmp_path / "b.png"), "distillation loss", "KL + CE"
    )
    assert drawn == [("training loss (nats/token)", ""), ("distillation loss", "KL + CE")]
