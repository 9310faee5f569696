"""Continued pretraining from a HF checkpoint (`checkpoint.init_from = "hf:DIR"`): the parameters read shard by
shard onto a mesh equal the exported ones, a run started from the export trains exactly like one started from
the workdir it came from, and a checkpoint of another model or tokenizer is refused in one line."""

import dataclasses
import json
import os

import jax
import numpy as np
import pytest

from apertus_jax.data import demo_corpus
from apertus_jax.data.run_tokenizer import run_tokenizer
from apertus_jax.jobs.pretrain import pretrain
from apertus_jax.models import hf
from apertus_jax.tokenizers.load import load_tokenizer
from apertus_jax.train.run import Run
from apertus_jax.trained import export
from apertus_jax.trained.workdir import read_config

from ..conftest import truncated_hf_copy, write_tiny_workdir

STEPS = 2
# Nothing from a hub: every file is local.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(workdir, its parameters, the HF export of it) of a tiny model with the 1,024-id demo BPE."""
    workdir = str(tmp_path_factory.mktemp("tiny"))
    params = write_tiny_workdir(workdir, 3, init_std=0.5)
    out = str(tmp_path_factory.mktemp("tiny_hf"))
    export.export_hf(workdir, out)
    return workdir, params, out


def _run_config(workdir, **model):
    run = read_config(workdir)
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


def test_step_zero_logits_equal_the_transformers_model_on_a_1x8_mesh(exported):
    """The parameters read onto an fsdp=8 mesh give the logits that transformers gives for the export, on the
    first lines of eight UDHR translations (real text, several scripts): within 1e-5 in float64, and within
    the two implementations' float32 rounding in float32."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    workdir, _, out = exported
    texts = [
        demo_corpus.load_udhr()[meta["code"]].splitlines()[0] for meta in demo_corpus.udhr_languages()[:8]
    ]
    data = _run_config(workdir).data
    ids = [run_tokenizer(data.tokenizer, data.demo_tokenizer_vocab).encode(text)[:32] for text in texts]
    tokens = np.stack([np.pad(row, (0, 32 - len(row)), constant_values=row[-1]) for row in ids]).astype(
        np.int32
    )
    positions = np.broadcast_to(np.arange(32, dtype=np.int32), tokens.shape)
    ours = {}
    for dtype in ("float32", "float64"):
        with jax.enable_x64(dtype == "float64"):
            config = _run_config(workdir, dtype=dtype)
            config = config.replace(mesh=dataclasses.replace(config.mesh, data=1, fsdp=8, tensor=1))
            run = Run(config, devices=jax.devices()[:8])
            assert dict(run.mesh.shape) == {"data": 1, "fsdp": 8, "tensor": 1}
            params = hf.read_params(out, config.model, run.spec.abstract["params"])
            with jax.set_mesh(run.mesh):
                apply = jax.jit(run.spec.apply_fn)
                ours[dtype] = jax.device_get(apply(params, tokens, positions, np.ones_like(tokens)))
    assert ours["float64"].dtype == np.float64
    theirs = {}
    for dtype in (torch.float32, torch.float64):
        model = transformers.AutoModelForCausalLM.from_pretrained(
            out, dtype=dtype, attn_implementation="eager"
        )
        with torch.no_grad():
            theirs[dtype] = model(input_ids=torch.from_numpy(tokens).long()).logits.numpy()
    exact = theirs[torch.float64]
    assert np.abs(exact).max() > 5
    # float64: 4.5e-6 at logits up to 14.3. What is left is float32 inside transformers' float64 forward: its
    # RMSNorm and softmax cast to float32, its RoPE tables are float32 (ours are too, 5 of 128 entries one ulp
    # apart); with those casts removed from it and XLA's tables given to it, the logits agree to 3e-14.
    np.testing.assert_allclose(ours["float64"], exact, rtol=0, atol=1e-5)
    # float32: the two round differently by up to 1.2e-5 (1.3e-5 on other meshes), while the parameters are read
    # bit for bit (the test above); ours are as close to the float64 logits as transformers' own float32 ones.
    np.testing.assert_allclose(ours["float32"], theirs[torch.float32], rtol=0, atol=2e-5)
    ours_error, their_error = (
        np.abs(ours["float32"] - exact).max(),
        np.abs(theirs[torch.float32] - exact).max(),
    )
    assert ours_error <= 1.5 * their_error, (ours_error, their_error)


@pytest.mark.slow
def test_a_run_from_the_export_trains_like_a_run_from_its_workdir(exported, tmp_path, read_records):
    workdir, _, out = exported
    losses = {}
    for name, source in (("workdir", workdir), ("hf", f"hf:{out}")):
        config = read_config(workdir)
        config = config.replace(
            train=dataclasses.replace(config.train, steps=STEPS),
            checkpoint=dataclasses.replace(config.checkpoint, init_from=source, every_steps=STEPS),
            mesh=dataclasses.replace(config.mesh, data=-1),
        )
        assert pretrain(config, str(tmp_path / name)) == "done"
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


def test_the_pretrain_command_refuses_another_model_in_one_line_and_writes_nothing(
    exported, tmp_path, run_job
):
    _, _, out = exported
    result = run_job(
        "experiments.pretrain",
        "--config=configs/runs/tiny_demo.py",
        f"--config.checkpoint.init_from=hf:{out}",
        f"--workdir={tmp_path}/w",
    )
    assert result.returncode == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        f"error: checkpoint.init_from=hf:{out}: its config.json gives vocab_size=1024, the run has "
        "model.vocab_size=4096; set --config.model.vocab_size=1024"
    ]
    assert not os.path.exists(f"{tmp_path}/w")


def test_a_truncated_safetensors_file_is_one_line_naming_it_and_writes_nothing(exported, tmp_path, run_job):
    """Before: 40 lines ending in `SafetensorError: Error while deserializing header: incomplete metadata, file
    not fully covered`, exit status 1, when the run read the parameters."""
    _, _, out = exported
    broken = truncated_hf_copy(out, tmp_path / "truncated")
    result = run_job(
        "experiments.pretrain",
        "--config=configs/runs/tiny_demo.py",
        f"--config.checkpoint.init_from=hf:{broken}",
        f"--workdir={tmp_path}/w",
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        f"error: checkpoint.init_from=hf:{broken}: {broken / hf.WEIGHTS_FILE} is not a whole safetensors file "
        "(Error while deserializing header: incomplete metadata, file not fully covered); copy or export it again"
    ]
    assert not os.path.exists(f"{tmp_path}/w")
