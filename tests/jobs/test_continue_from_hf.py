"""Continued pretraining from a HF checkpoint (`checkpoint.init_from = "hf:DIR"`): the parameters read shard by
shard onto a mesh equal the exported ones, a run started from the export trains exactly like one started from
the workdir it came from, and a checkpoint of another model or tokenizer is refused in one line."""

import dataclasses
import json
import os

import jax
import numpy as np
import pytest

from apertus_jax.jobs import export
from apertus_jax.jobs.pretrain import pretrain
from apertus_jax.jobs.workdir import read_config
from apertus_jax.models import hf
from apertus_jax.tokenizers.load import load_tokenizer
from apertus_jax.train.run import Run

from .conftest import write_tiny_workdir

STEPS = 2


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(workdir, its parameters, the HF export of it) of a tiny model with the 1,024-id demo BPE."""
    workdir = str(tmp_path_factory.mktemp("tiny"))
    params = write_tiny_workdir(workdir, 3, init_std=0.5)
    out = str(tmp_path_factory.mktemp("tiny_hf"))
    export.export_hf(workdir, out)
    return workdir, params, out


def _run_config(workdir, **model):
    run = read_config(workdir).run
    return run.replace(model=dataclasses.replace(run.model, **model))


@pytest.mark.parametrize("scan_layers", [False, True])
def test_the_parameters_are_read_shard_by_shard_onto_the_mesh(exported, scan_layers, monkeypatch):
    workdir, params, out = exported
    config = _run_config(workdir, scan_layers=scan_layers)
    config = config.replace(mesh=dataclasses.replace(config.mesh, data=1, fsdp=4, tensor=2))
    run = Run(config, devices=jax.devices()[:8])
    boxes = []
    read_box = hf._read_box
    monkeypatch.setattr(hf, "_read_box", lambda *a: boxes.append(read_box(*a)) or boxes[-1])
    read = hf.read_params(out, config.model, run.spec.abstract["params"])
    shardings = jax.tree.map(lambda leaf: leaf.sharding, run.spec.abstract["params"])
    assert jax.tree.map(lambda a: a.sharding, read) == shardings
    if scan_layers:  # the workdir's layers are a list; the scanned model stacks them
        layers = params["layers"]
        params = {
            **params,
            "layers": jax.tree.map(lambda *x: np.stack(x), *(layers[i] for i in sorted(layers))),
        }
    jax.tree.map(np.testing.assert_array_equal, jax.device_get(read), params)
    # Every read is one device's shard: the embedding is split over the mesh, and no read holds it whole.
    embed = run.spec.abstract["params"]["embed"]
    shard = embed.sharding.shard_shape(embed.shape)
    assert np.prod(shard) < np.prod(embed.shape) and shard in {b.shape for b in boxes}
    assert max(b.size for b in boxes) < np.prod(embed.shape)


@pytest.mark.slow
def test_a_run_from_the_export_trains_like_a_run_from_its_workdir(exported, tmp_path, read_records):
    workdir, _, out = exported
    losses = {}
    for name, source in (("workdir", workdir), ("hf", f"hf:{out}")):
        config = read_config(workdir)
        run = config.run.replace(
            train=dataclasses.replace(config.run.train, steps=STEPS),
            checkpoint=dataclasses.replace(config.run.checkpoint, init_from=source, every_steps=STEPS),
            mesh=dataclasses.replace(config.run.mesh, data=-1),
        )
        assert pretrain(dataclasses.replace(config, run=run), str(tmp_path / name)) == "done"
        losses[name] = [(r["step"], r["loss"], r["grad_norm"]) for r in read_records(str(tmp_path / name))]
    assert len(losses["hf"]) == STEPS and losses["hf"] == losses["workdir"]


def test_another_model_or_tokenizer_is_refused_in_one_line(exported, tmp_path):
    workdir, _, out = exported
    config = _run_config(workdir)
    tokenizer = Run(config, devices=jax.devices()[:1]).tokenizer
    hf.check_init_dir(out, config.model, tokenizer)  # the exported model and tokenizer pass
    with pytest.raises(ValueError, match=r"config.json gives n_layers=2, the run has model.n_layers=3; set"):
        hf.check_init_dir(out, dataclasses.replace(config.model, n_layers=3), tokenizer)
    with pytest.raises(
        ValueError, match=r"tokenizer.json has vocab_size=1024, the run's tokenizer tekken 131072"
    ):
        hf.check_init_dir(out, config.model, load_tokenizer("tekken"))
    weights_only = tmp_path / "weights_only"
    weights_only.mkdir()
    for name in (hf.CONFIG_FILE, hf.WEIGHTS_FILE):
        os.link(os.path.join(out, name), weights_only / name)
    with pytest.raises(FileNotFoundError, match="no tokenizer.json"):
        hf.check_init_dir(str(weights_only), config.model, tokenizer)
    with open(os.path.join(out, hf.CONFIG_FILE)) as f:
        assert json.load(f)["num_hidden_layers"] == 2
