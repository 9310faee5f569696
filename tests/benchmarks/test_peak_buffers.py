"""benchmarks.peak_buffers: the values live at a compiled program's memory peak, read from XLA's dump."""

import jax
import jax.numpy as jnp
import pytest

from benchmarks import peak_buffers


def test_the_groups_hold_every_value_live_at_the_peak_with_its_shape_and_source(tmp_path):
    def loss(x_NxD, w_DxF):
        return (jnp.tanh(x_NxD @ w_DxF) @ w_DxF.T).sum()

    x, w = jnp.ones((128, 256), jnp.float32), jnp.ones((256, 512), jnp.float32)
    jax.jit(jax.grad(loss, argnums=1)).lower(x, w).compile(compiler_options={"xla_dump_to": str(tmp_path)})
    (path,) = tmp_path.glob("*jit_loss*after_optimizations-live-range.txt")
    values = peak_buffers.live_at_peak(path.read_text())
    groups = peak_buffers.peak_groups(str(tmp_path), "jit_loss")
    assert sum(g["gb"] for g in groups) == pytest.approx(sum(size for *_, size in values) / 1e9)
    assert sum(g["count"] for g in groups) == len(values)
    assert groups == sorted(groups, key=lambda g: -g["gb"])
    # the parameter w is live at the peak (its gradient needs it), whole: 256 x 512 float32
    (w_group,) = [g for g in groups if g["op"] == "parameter" and g["type"] == "f32[256,512]"]
    assert w_group["gb"] * 1e9 == 256 * 512 * 4
    # the backward pass (jax's transpose) made the [256, 512] gradient terms live beside it
    assert any(g["type"] == "f32[256,512]" and g["source"].startswith("transpose(jvp())") for g in groups)


def test_a_tuple_value_takes_its_element_type_and_bad_dumps_are_named():
    hlo = '  %t = (f32[4]{0}, /*index=1*/bf16[2,8]{1,0:T(8,128)}) custom-call(%a), metadata={op_name="jit(f)/x"}\n'
    assert peak_buffers.instructions(hlo) == {"t": (["f32[4]", "bf16[2,8]"], "custom-call", "jit(f)/x")}
    with pytest.raises(ValueError, match="no 'Live ranges at N \\(peak\\)' section"):
        peak_buffers.live_at_peak("Total bytes: 8\n")


def test_a_folder_without_a_dump_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no live-range dump of train_step"):
        peak_buffers.peak_groups(str(tmp_path))
