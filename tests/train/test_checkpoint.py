"""Checkpoints: restore onto other meshes, corrupt latest, keep-N, lock, shape guard."""

import asyncio
import gc
import json
import os
import shutil

import jax
import numpy as np
import pytest

from apertus_jax.models.partitioning import make_mesh
from apertus_jax.models.presets import get_config
from apertus_jax.optim.factory import make_optimizer
from apertus_jax.train.batches import Prefetcher
from apertus_jax.train.checkpoint import (
    Checkpointer,
    WorkdirLock,
    WorkdirLockedError,
    check_same_model,
    restore_workdir_params,
    tree_shapes,
    workdir_params,
)
from apertus_jax.train.loss import cross_entropy
from apertus_jax.train.step import make_train_step
from apertus_jax.train.train_state import (
    batch_sharding,
    make_abstract_params,
    make_abstract_train_state,
    make_global_batch,
)

MODEL = get_config(
    "tiny", vocab_size=1024, d_model=32, n_heads=4, n_kv_heads=2, head_dim=8, mlp_hidden=64, max_seq_len=32
)
TX = make_optimizer("ademamix", 1e-3, weight_decay=0.1, clip_norm=1.0)


def _step_fn(spec, mesh):
    return jax.jit(
        make_train_step(spec, TX, cross_entropy(), 2),
        in_shardings=(spec.shardings["params"], spec.shardings["opt_state"], batch_sharding(mesh), None),
    )


def _meta(spec, step):
    return {"progress": {"step": step}, "param_shapes": tree_shapes(spec.abstract["params"])}


@pytest.fixture(scope="module")
def saved(tmp_path_factory, demo_iterator):
    """Two steps on an 8-device (fsdp 4, tensor 2) mesh, checkpoints after steps 1 and 2, then step 3's loss."""
    directory = str(tmp_path_factory.mktemp("ckpt") / "checkpoints")
    mesh = make_mesh(1, 4, 2)
    spec = make_abstract_train_state(MODEL, TX, mesh, seed=0)
    step = _step_fn(spec, mesh)
    state, data = spec.init(), demo_iterator()
    checkpointer = Checkpointer(directory, keep=5)
    for i in (1, 2):
        params, opt_state, _ = step(
            state["params"], state["opt_state"], make_global_batch(next(data), mesh), None
        )
        state = {"params": params, "opt_state": opt_state}
        checkpointer.save(i, state, data, _meta(spec, i))
    checkpointer.wait()
    host_state = jax.device_get(state)
    next_batch = next(data)
    _, _, metrics = step(state["params"], state["opt_state"], make_global_batch(next_batch, mesh), None)
    return directory, host_state, next_batch, float(metrics["loss"])


@pytest.mark.slow
@pytest.mark.parametrize(
    "mesh_shape",
    [(1, 2, 4), (1, 8, 1), (1, 1, 1), (1, 2, 1, 4), (1, 1, 1, 8)],
    ids=["2x4", "8x1", "1device", "fsdp2xcontext4", "context8"],
)
def test_restore_onto_another_mesh(saved, mesh_shape, demo_iterator):
    """Saved on fsdp 4 x tensor 2; restored onto other fsdp/tensor splits and onto context-parallel meshes
    (data, fsdp, tensor, context)."""
    directory, host_state, next_batch, next_loss = saved
    devices = jax.devices()[: int(np.prod(mesh_shape))]
    data, fsdp, tensor, context = (*mesh_shape, 1)[:4]
    mesh = make_mesh(data, fsdp, tensor, devices, context)
    spec = make_abstract_train_state(
        MODEL, TX, mesh, seed=1
    )  # another seed: everything must come from the checkpoint
    data = demo_iterator()
    state, meta = Checkpointer(directory, keep=5).restore_latest(spec.abstract, data)
    assert meta["progress"]["step"] == 2
    for restored, expected in zip(jax.tree.leaves(state), jax.tree.leaves(host_state)):
        np.testing.assert_array_equal(np.asarray(restored), expected)
        assert len(restored.sharding.device_set) == len(devices)
    batch = next(data)
    for key in next_batch:
        np.testing.assert_array_equal(batch[key], next_batch[key])
    step = _step_fn(spec, mesh)
    _, _, metrics = step(state["params"], state["opt_state"], make_global_batch(batch, mesh), None)
    # Same math, different reduction order over shards: equal to float32 rounding.
    np.testing.assert_allclose(float(metrics["loss"]), next_loss, rtol=2e-6)


@pytest.mark.slow
def test_corrupt_latest_is_set_aside_and_previous_used(saved, tmp_path, demo_iterator, caplog):
    directory = str(tmp_path / "checkpoints")
    os.system(f"cp -r {saved[0]} {directory}")
    state_dir = os.path.join(directory, "2", "params")
    for name in os.listdir(state_dir):  # truncate every file of step 2's arrays
        path = os.path.join(state_dir, name)
        if os.path.isfile(path):
            open(path, "w").close()
    spec = make_abstract_train_state(MODEL, TX, make_mesh(1, 8, 1), seed=0)
    checkpointer = Checkpointer(directory, keep=5)
    _, meta = checkpointer.restore_latest(spec.abstract, demo_iterator())
    assert meta["progress"]["step"] == 1
    assert checkpointer.all_steps() == [1]
    assert os.path.isdir(os.path.join(directory + "_corrupt", "2"))
    # asyncio reports a failed read nobody retrieved when its future is collected, maybe during a later restore:
    # those of the checkpoint set aside are not reported again, others are.
    loop = asyncio.new_event_loop()

    def collect_unretrieved(message):
        future = loop.create_future()
        future.set_exception(ValueError(message))
        del future
        gc.collect()

    with caplog.at_level("ERROR", logger="asyncio"):
        collect_unretrieved(f'Error reading "lm_head/0.0" in OCDBT database at local file "{state_dir}/"')
        collect_unretrieved(
            f'Error reading "lm_head/0.0" in OCDBT database at local file "{directory}/1/params/"'
        )
    loop.close()
    reported = [str(r.exc_info[1]) for r in caplog.records if r.name == "asyncio"]
    assert len(reported) == 1 and f"{directory}/1/params/" in reported[0], reported


@pytest.mark.slow
def test_checkpoint_of_another_model_shape_is_refused_untouched(saved, demo_iterator):
    directory = saved[0]
    before = sorted(os.walk(directory))
    other = MODEL.replace(d_model=48)
    spec = make_abstract_train_state(other, TX, make_mesh(1, 8, 1), seed=0)
    with pytest.raises(ValueError, match="of another model"):
        Checkpointer(directory, keep=5).restore_latest(spec.abstract, demo_iterator())
    assert sorted(os.walk(directory)) == before


@pytest.mark.slow
@pytest.mark.parametrize(
    "tx",
    [
        make_optimizer("adamw", 1e-3, weight_decay=0.1, clip_norm=1.0),
        make_optimizer("lion", 1e-4, weight_decay=0.1, clip_norm=1.0),
    ],
    ids=["adamw", "lion"],
)
def test_checkpoint_of_another_optimizer_is_refused_untouched(saved, demo_iterator, tx):
    """Resuming under other optimizer settings is a one-line error naming the first state entry that differs,
    not a checkpoint to set aside as unreadable (every one would be, and the run would restart from step 0)."""
    directory = saved[0]
    before = sorted(os.walk(directory))
    spec = make_abstract_train_state(MODEL, tx, make_mesh(1, 8, 1), seed=0)
    with pytest.raises(ValueError, match="holds the optimizer state of other optimizer settings") as error:
        Checkpointer(directory, keep=5).restore_latest(spec.abstract, demo_iterator())
    assert "\n" not in str(error.value) and "first difference: " in str(error.value)
    assert sorted(os.walk(directory)) == before


@pytest.mark.slow
def test_checkpoint_of_other_data_settings_is_refused_untouched(saved, demo_iterator):
    """A batch source that rejects the saved data position (here another seq_len) is a one-line error with its
    reason, not a checkpoint to set aside as unreadable (the run would restart from step 0)."""
    directory = saved[0]
    before = sorted(os.walk(directory))
    spec = make_abstract_train_state(MODEL, TX, make_mesh(1, 8, 1), seed=0)
    batches = Prefetcher(demo_iterator(seq_len=16), 0)
    with pytest.raises(ValueError, match="holds the data position of other data settings") as error:
        Checkpointer(directory, keep=5).restore_latest(spec.abstract, batches)
    assert "\n" not in str(error.value) and "saved by a different pipeline" in str(error.value)
    assert sorted(os.walk(directory)) == before


def _break_params(directory: str, *steps: int) -> None:
    """Empties the files of each step's `params/` item (a copy cut short)."""
    for step in steps:
        state_dir = os.path.join(directory, str(step), "params")
        for name in os.listdir(state_dir):
            if os.path.isfile(path := os.path.join(state_dir, name)):
                open(path, "w").close()


@pytest.mark.slow
def test_a_reader_of_another_jobs_checkpoints_leaves_an_unreadable_one_in_place(saved, tmp_path, caplog):
    """`read_only` (evaluation, export, init_from): the previous checkpoint is read, the broken one stays."""
    directory = str(tmp_path / "checkpoints")
    shutil.copytree(saved[0], directory)
    _break_params(directory, 2)
    before = sorted(os.walk(tmp_path))
    abstract = make_abstract_params(MODEL, make_mesh(1, 8, 1), seed=1).abstract
    with caplog.at_level("WARNING"):
        _, meta = restore_workdir_params(str(tmp_path), abstract)
    assert meta["progress"]["step"] == 1
    assert sorted(os.walk(tmp_path)) == before
    assert [r.getMessage().split(" (")[0] for r in caplog.records if r.levelname == "WARNING"] == [
        f"checkpoint 2 in {directory} is unreadable"
    ]
    assert (
        caplog.records[-1]
        .getMessage()
        .endswith("left in place (this job only reads it), read step 1 instead")
    )


@pytest.mark.slow
def test_a_workdir_whose_every_checkpoint_is_unreadable_is_one_line_naming_the_newest(
    saved, tmp_path, caplog
):
    """Before: a warning per checkpoint, then `no readable checkpoint under ...; train first`: two lines or
    more, and a fix for a workdir that was never trained. As `checkpoint.init_from`, the line names it."""
    directory = str(tmp_path / "checkpoints")
    shutil.copytree(saved[0], directory)
    _break_params(directory, 1, 2)
    before = sorted(os.walk(tmp_path))
    abstract = make_abstract_params(MODEL, make_mesh(1, 8, 1), seed=1).abstract
    with caplog.at_level("WARNING"), pytest.raises(ValueError) as error:
        workdir_params(str(tmp_path)).load(abstract)
    assert str(error.value).startswith(
        f"checkpoint.init_from={tmp_path}: checkpoint 2 in {directory} is unreadable ("
    ), str(error.value)
    assert str(error.value).endswith(
        "and no earlier one is readable: copy the workdir again from where it was written, or give a workdir "
        "whose checkpoints are whole"
    )
    assert "\n" not in str(error.value) and not caplog.records
    assert sorted(os.walk(tmp_path)) == before


@pytest.mark.slow
def test_params_restore_alone_without_reading_the_optimizer_state(saved, tmp_path):
    directory = str(tmp_path / "checkpoints")
    shutil.copytree(saved[0], directory)
    for step in ("1", "2"):
        shutil.rmtree(os.path.join(directory, step, "opt_state"))  # nothing of it can be read
    abstract = make_abstract_params(MODEL, make_mesh(1, 2, 4), seed=1).abstract
    params, meta = Checkpointer(directory, keep=5).restore_latest_params(abstract)
    assert meta["progress"]["step"] == 2
    for restored, expected in zip(jax.tree.leaves(params), jax.tree.leaves(saved[1]["params"])):
        np.testing.assert_array_equal(np.asarray(restored), expected)
    assert sorted(os.listdir(directory)) == ["1", "2"]  # nothing set aside


@pytest.mark.slow
def test_checkpoint_of_another_layout_is_refused_untouched(saved, tmp_path):
    directory = str(tmp_path / "checkpoints")
    shutil.copytree(saved[0], directory)
    meta_dir = os.path.join(directory, "2", "meta")
    meta_file = os.path.join(meta_dir, "metadata")  # Orbax's JsonSave file
    with open(meta_file) as f:
        meta = json.load(f)
    del meta["format"]  # as the earlier single-"state" layout wrote it
    with open(meta_file, "w") as f:
        json.dump(meta, f)
    before = sorted(os.walk(directory))
    spec = make_abstract_train_state(MODEL, TX, make_mesh(1, 8, 1), seed=0)
    with pytest.raises(ValueError, match="has another layout") as error:
        Checkpointer(directory, keep=5).restore_latest(spec.abstract)
    assert "\n" not in str(error.value)
    assert sorted(os.walk(directory)) == before


@pytest.mark.slow
def test_every_checkpoint_unreadable_starts_over_at_the_first_batch(saved, tmp_path, demo_iterator):
    """Each checkpoint fails after its data position may have been read: the iterator is put back each time,
    so the run that starts over reads the data from its first batch (not from a set-aside checkpoint's)."""
    directory = str(tmp_path / "checkpoints")
    shutil.copytree(saved[0], directory)
    for step in ("1", "2"):
        state_dir = os.path.join(directory, step, "params")
        for name in os.listdir(state_dir):
            if os.path.isfile(os.path.join(state_dir, name)):
                open(os.path.join(state_dir, name), "w").close()
    spec = make_abstract_train_state(MODEL, TX, make_mesh(1, 8, 1), seed=0)
    checkpointer, data = Checkpointer(directory, keep=5), demo_iterator()
    assert checkpointer.restore_latest(spec.abstract, data) is None
    assert [step for step, _ in checkpointer.unreadable] == [2, 1]
    first = next(demo_iterator())
    batch = next(data)
    for key in first:
        np.testing.assert_array_equal(batch[key], first[key])


@pytest.mark.slow
def test_keep_n(saved, tmp_path, demo_iterator):
    host_state, data = saved[1], demo_iterator()
    checkpointer = Checkpointer(str(tmp_path / "c"), keep=2)
    for i in range(1, 5):
        checkpointer.save(i, host_state, data, {"progress": {"step": i}})
    checkpointer.wait()
    assert checkpointer.all_steps() == [3, 4]


def test_workdir_lock_excludes_a_second_run(tmp_path):
    assert not WorkdirLock.held(str(tmp_path))
    with WorkdirLock(str(tmp_path)):
        assert WorkdirLock.held(str(tmp_path))
        with pytest.raises(WorkdirLockedError, match="in use by another run"):
            with WorkdirLock(str(tmp_path)):
                pass
    with WorkdirLock(str(tmp_path)):  # released
        pass


@pytest.mark.parametrize("scan_layers", [False, True])
def test_another_model_is_described_in_words(scan_layers):
    """2 layers saved, 4 asked for: the message says so (an unscanned run's missing layer was `None` before)."""
    mesh = make_mesh(1, 1, 1, jax.devices()[:1])

    def shapes(n_layers):
        model = MODEL.replace(n_layers=n_layers, scan_layers=scan_layers)
        return tree_shapes(make_abstract_params(model, mesh, seed=0).abstract)

    with pytest.raises(ValueError) as error:
        check_same_model(shapes(2), shapes(4), "/runs/a/checkpoints")
    message = str(error.value)
    words = (
        f"d_model {MODEL.d_model}, {MODEL.n_heads} query and {MODEL.n_kv_heads} KV heads of {MODEL.head_dim}"
    )
    assert message.startswith(
        f"/runs/a/checkpoints holds a checkpoint of another model: the checkpoint has 2 layers, {words}"
    ), message
    assert f"; the config asks for 4 layers, {words}" in message
    assert f"a {MODEL.vocab_size}-id vocabulary" in message and "None" not in message
