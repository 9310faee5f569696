"""Compile targets (apertus_jax.aot.compile_targets, target_plan): names, bad inputs, and, with the `accelerators`
extra installed, the tiny model's train step compiled by the TPU and GPU compilers.

The tests that need the extra are marked `accelerators`; .ci/accelerators installs it and runs those that are
not `slow` (the kernels in the programs, the GPU configs). The `slow` ones, the step-time estimate's (minutes
of TPU compiles on 2 cores), run by hand with the extra installed:

    python -m pytest -q tests/aot/test_compile_targets.py -m "accelerators and slow"
"""

import dataclasses
import json
import re
import subprocess
import sys
import types

import jax
import jax.numpy as jnp
import pytest

from apertus_jax.aot import compile_targets, target_plan
from apertus_jax.config.schema import parse
from apertus_jax.models.fp8 import fp8_einsum
from apertus_jax.train.metrics import peak_flops_per_device
from configs.runs import tiny_demo


def _needs(platform: str, compiler: str):
    """Marks a test `accelerators`, skipped when this Python lacks the extra's `compiler` for `platform`."""
    skip = pytest.mark.skipif(
        compile_targets.missing_extra(platform) is not None, reason=f"no {compiler}: .[accelerators]"
    )
    return lambda test: pytest.mark.accelerators(skip(test))


needs_tpu = _needs("tpu", "libtpu")
needs_gpu = _needs("gpu", "CUDA plugin")


@pytest.mark.parametrize(
    "name, slices, platform, devices, topology",
    [
        ("v5p-128", 1, "tpu", 64, "4x4x4"),
        ("v5p-8", 1, "tpu", 4, "2x2x1"),
        ("v4-256", 1, "tpu", 128, "4x4x8"),
        ("v5e-4", 1, "tpu", 4, "2x2"),
        ("v6e-256", 1, "tpu", 256, "16x16"),
        ("v5e-128", 1, "tpu", 128, "8x16"),
        ("v5p-16", 2, "tpu", 16, "2x2x2"),
        ("tpu7x-128", 1, "tpu", 128, "4x4x4"),  # 64 chips of two TensorCores, each a device
        ("tpu7x-8", 1, "tpu", 8, "2x2x1"),
        ("h100:1x8", 1, "gpu", 8, "1x8"),
        ("gb200:4x4", 1, "gpu", 16, "4x4"),
    ],
)
def test_target_names_as_google_cloud_and_hostsxgpus(name, slices, platform, devices, topology):
    target = compile_targets.parse_target(name, slices)
    assert (target.platform, target.devices, target.topology, target.num_slices) == (
        platform,
        devices,
        topology,
        slices,
    )


@pytest.mark.parametrize(
    "name, chips_per_host, wrap",
    [
        ("v5p-128", (2, 2, 1), (True, True, True)),  # one 4x4x4 cube: a 3D torus of 16 hosts
        ("v4-256", (2, 2, 1), (True, True, True)),
        ("v5p-64", (2, 2, 1), (False, False, False)),  # 2x4x4: less than a cube, a mesh
        ("v5p-8", (2, 2, 1), (False, False, False)),
        ("v5e-128", (2, 2, 1), (False, True, False)),  # 8x16: the side of 16 wraps
        ("v6e-256", (2, 2, 1), (True, True, False)),
        ("tpu7x-128", (2, 2, 1), (True, True, True)),
        ("v5e-1", (1, 1, 1), (False, False, False)),
    ],
)
def test_tpu_hosts_hold_four_chips_and_whole_cubes_or_pod_sides_wrap_around(name, chips_per_host, wrap):
    target = compile_targets.parse_target(name)
    assert (target.chips_per_host, target.wrap) == (chips_per_host, wrap)


def test_hbm_per_device():
    assert compile_targets.parse_target("v5p-128").hbm_gb == 95
    assert compile_targets.parse_target("v5e-4").hbm_gb == 16
    # TPU7x: 192 GiB per chip, two devices per chip; 2,307 TFLOP/s bf16 per chip
    tpu7x = compile_targets.parse_target("tpu7x-8")
    assert round(tpu7x.hbm_gb, 2) == 103.08 and tpu7x.peak_flops == 2307e12 / 2
    # the target configs' device_memory_size: 79.1 GiB of an H100 80GB, 141 GB of an H200 are 151.4e9 bytes
    assert round(compile_targets.parse_target("h100:1x8").hbm_gb, 2) == 84.94
    assert round(compile_targets.parse_target("h200:2x8").hbm_gb, 2) == 151.40


@pytest.mark.parametrize(
    "name, slices, message",
    [
        ("v5p-100", 1, "powers of two"),
        ("v5e-512", 1, "powers of two"),
        ("v5p-2", 1, "powers of two"),
        ("tpu-8", 1, "unknown target"),
        ("h100:8", 1, "unknown target"),
        ("gh200:1x4", 1, "unknown target"),
        ("h100:0x8", 1, "unknown target"),
        ("h100:1x8", 2, "num_slices is for TPU"),
        ("v5p-128", 0, "num_slices=0"),
    ],
)
def test_bad_target_names(name, slices, message):
    with pytest.raises(ValueError, match=message):
        compile_targets.parse_target(name, slices)


def test_the_target_forms_are_those_parse_target_accepts_and_memory_plan_s_help_lists_them(run_job):
    """Before: --help typed its own list, without tpu7x."""
    assert compile_targets.target_forms() == (
        "TPU v4-N, v5p-N, v5e-N, v6e-N, tpu7x-N (e.g. v5p-128) or GPU KIND:HOSTSxGPUS, KIND one of h100, h200, "
        "b200, gb200 (e.g. h100:1x8)"
    )
    for kind in compile_targets.TPU_CHIPS:
        assert compile_targets.parse_target(f"{kind}-8").kind == kind
    for kind in compile_targets.GPU_KINDS:
        assert compile_targets.parse_target(f"{kind}:1x8").kind == kind
    result = run_job("experiments.memory_plan", "--help")
    assert result.returncode == 0
    assert compile_targets.target_forms() in " ".join(result.stdout.split())  # --help wraps its lines


def test_meshes_must_use_all_devices_of_the_target():
    config = parse(tiny_demo.get_config())
    target = compile_targets.parse_target("v5p-128")
    assert target_plan.target_meshes(config, target, []) == [(64, 1, 1)]  # tiny_demo: data=-1
    assert target_plan.target_meshes(config, target, ["1x16x4", "1x16x1x4"]) == [(1, 16, 4), (1, 16, 1, 4)]
    with pytest.raises(ValueError, match="mesh 1x8x1 has 8 devices but --target=v5p-128 has 64"):
        target_plan.target_meshes(config, target, ["1x8x1"])


@pytest.mark.parametrize(
    "name, absent", [("v5e-4", "libtpu"), ("h100:1x8", compile_targets.COMPILER_MODULES["gpu"][0])]
)
def test_a_missing_extra_names_the_install_line(name, absent, monkeypatch):
    monkeypatch.setitem(sys.modules, absent, None)  # a None entry: the package cannot be found
    with pytest.raises(ValueError) as error:
        compile_targets.target_devices(compile_targets.parse_target(name))
    assert str(error.value) == (
        f"--target={name} needs the 'accelerators' extra ({absent} is not installed); "
        'install it with: pip install -e ".[accelerators]"'
    )


# With the extra installed, `import jax` loads the CUDA plugin, whose native loader logs that it found no driver.
NATIVE_LOG = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) .*|I\d{4} [\d:. ]+\d+ cudart_stub\.cc:\d+\] .*"
)


@pytest.fixture
def memory_plan(run_job):
    """`experiments.memory_plan` on the tiny demo config with `args`, the CUDA loader's lines dropped from stderr."""

    def run(*args: str) -> subprocess.CompletedProcess:
        done = run_job("experiments.memory_plan", "--config=configs/runs/tiny_demo.py", *args)
        done.stderr = "".join(
            line for line in done.stderr.splitlines(True) if not NATIVE_LOG.fullmatch(line.strip())
        )
        return done

    return run


@pytest.mark.parametrize(
    "args, message",
    [
        (["--target=v5x-8"], "error: --target=v5x-8: unknown target; use TPU v4-N"),
        (
            ["--target=h100:1x8", "--meshes=1x4x1"],
            "error: mesh 1x4x1 has 4 devices but --target=h100:1x8 has 8",
        ),
        (["--num_slices=2"], "error: --num_slices goes with --target=NAME"),
        (
            ["--target=v5e-4", "--json=/nonexistent/plan.json"],
            "error: --json=/nonexistent/plan.json: the folder",
        ),
    ],
)
def test_cli_bad_inputs_one_line_exit_2(args, message, memory_plan):
    done = memory_plan(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [done.stderr.strip()] and done.stderr.startswith(message)


@pytest.mark.skipif(
    compile_targets.missing_extra("tpu") is None, reason="libtpu installed: the extra is not missing"
)
def test_cli_without_the_extra_one_line_exit_2(memory_plan):
    done = memory_plan("--target=v5e-4")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "error: --target=v5e-4 needs the 'accelerators' extra (libtpu is not installed); "
        'install it with: pip install -e ".[accelerators]"'
    )


def test_scaled_is_exact_for_bilinear_costs():
    cost = lambda layers, micro: 3.0 + 5.0 * layers + micro * (7.0 + 11.0 * layers)  # noqa: E731
    points = {(n, m): cost(n, m) for n in (1, 2) for m in (1, 2)}
    assert target_plan.scaled(points, 32, 16) == cost(32, 16)


def test_kernels_read_compiled_hlo():
    hlo = "\n".join(
        [
            '  %splash_mha_fwd_segmented_residuals.2 = (f32[4]) custom-call(%a), custom_call_target="tpu_custom_call"',
            '  %splash_mha_dq_segmented_no_residuals = (f32[4]) custom-call(%a), custom_call_target="tpu_custom_call"',
            '  %custom-call.11 = f32[128] custom-call(%s), custom_call_target="ConcatBitcast"',
            '  %fmha.1 = (bf16[2]) custom-call(%q), custom_call_target="__cudnn$fmhaScaleBiasSoftmax"',
            '  %fmha.2 = (bf16[2]) custom-call(%q), custom_call_target="__cudnn$fmhaScaleBiasSoftmax"',
        ]
    )
    assert target_plan.kernels(hlo) == {
        "__cudnn$fmhaScaleBiasSoftmax": 2,
        "splash_mha_dq_segmented_no_residuals": 1,
        "splash_mha_fwd_segmented_residuals": 1,
    }


@pytest.fixture(scope="module", autouse=True)
def no_persistent_cache():
    """Compile-only executables cannot be read back from the session's persistent XLA cache: none here."""
    jax.config.update("jax_enable_compilation_cache", False)
    yield
    jax.config.update("jax_enable_compilation_cache", True)


@pytest.fixture(scope="module")
def tiny_bf16():
    config = parse(tiny_demo.get_config())
    return config.replace(model=config.model.replace(dtype="bfloat16"))


# The device kind each TPU generation's devices report (jax's `device_kind`).
TPU_DEVICE_KINDS = {
    "v4": "TPU v4",
    "v5p": "TPU v5",
    "v5e": "TPU v5 lite",
    "v6e": "TPU v6 lite",
    "tpu7x": "TPU7x",
}


@pytest.mark.parametrize("kind", list(compile_targets.TPU_CHIPS) + list(compile_targets.GPU_KINDS))
def test_the_trainer_knows_the_peak_of_every_target_kind(kind):
    """A run on a target's chips reports MFU from the trainer's peak table (else it stops at start): a TPU
    device's peak is its chip's over its devices; a GPU's is on NVIDIA's sheets (dense bf16)."""
    if kind in compile_targets.TPU_CHIPS:
        chip = compile_targets.TPU_CHIPS[kind]
        device = types.SimpleNamespace(device_kind=TPU_DEVICE_KINDS[kind], platform="tpu")
        assert peak_flops_per_device(device) == chip.peak_flops / chip.devices_per_chip
    else:
        name = re.search(r'device_description_str: "(.*)"', compile_targets.gpu_target_config(kind)).group(1)
        expected = {"h100": 989e12, "h200": 989e12, "b200": 2250e12, "gb200": 2500e12}[kind]
        assert peak_flops_per_device(types.SimpleNamespace(device_kind=name, platform="gpu")) == expected


@needs_gpu
@pytest.mark.parametrize("kind", compile_targets.GPU_KINDS)
def test_each_gpu_target_config_parses(kind):
    devices = compile_targets.target_devices(compile_targets.parse_target(f"{kind}:1x8"))
    name = next(
        line
        for line in compile_targets.gpu_target_config(kind).splitlines()
        if line.startswith("device_desc")
    )
    assert len(devices) == 8 and {d.platform for d in devices} == {"gpu"}
    assert name == f'device_description_str: "{devices[0].device_kind}"'


@needs_gpu
def test_tiny_step_on_eight_h100s_uses_cudnn_flash_attention(tiny_bf16):
    target = compile_targets.parse_target("h100:1x8")
    report = target_plan.plan_on_target(tiny_bf16, target, compile_targets.target_devices(target), (8, 1, 1))
    layers = tiny_bf16.model.n_layers
    assert report["kernels"]["__cudnn$fmhaScaleBiasSoftmax"] == layers
    assert report["kernels"]["__cudnn$fmhaScaleBiasSoftmaxBackward"] == layers
    assert report["fits"] and 0 < report["temps_gb"] < report["total_gb"] < report["hbm_gb"]
    assert "est_step_seconds" not in report  # no cost analysis on GPU


@needs_gpu
def test_fp8_projections_are_cublaslt_fp8_gemms_on_h100s_without_triton_gemms(tiny_bf16):
    """model.fp8: the forward, input-gradient and weight-gradient matmul of each of a layer's six projections
    (q, k, v, o, up, down) is a cuBLASLt FP8 GEMM once XLA's Triton GEMMs are off; the lm_head's three stay
    bf16. Before: no FP8 GEMM at all (the operands reached the matmul dequantized)."""
    config = tiny_bf16.replace(model=tiny_bf16.model.replace(fp8=True))
    target = compile_targets.parse_target("h100:1x8")
    report = target_plan.plan_on_target(
        config,
        target,
        compile_targets.target_devices(target),
        (8, 1, 1),
        compiler_options={"xla_gpu_enable_triton_gemm": False},
    )
    assert report["kernels"]["__cublas$lt$matmul$f8"] == 3 * 6 * config.model.n_layers
    assert report["kernels"]["__cublas$lt$matmul"] == 3


@needs_gpu
def test_fp8_einsum_multiplies_float8_operands_in_the_default_triton_gemms():
    """With XLA's Triton GEMMs on (the default of a compile without autotuning), every dot of fp8_einsum's
    forward and backward takes float8 operands: e4m3 x e4m3, e5m2 gradients x e4m3."""
    device = compile_targets.target_devices(compile_targets.parse_target("h100:1x8"))[0]
    sharding = jax.sharding.SingleDeviceSharding(device)
    x = jax.ShapeDtypeStruct((4, 512, 1024), jnp.bfloat16, sharding=sharding)
    w = jax.ShapeDtypeStruct((1024, 2048), jnp.bfloat16, sharding=sharding)

    def loss(x, w):
        return jnp.sum(fp8_einsum("btd,df->btf", x, w).astype(jnp.float32) ** 2)

    text = jax.jit(jax.grad(loss, (0, 1))).lower(x, w).compile().as_text()
    types_of = dict(re.findall(r"%([\w.\-]+) = (\w+)\[", text))
    operands = [
        types_of[a] + " x " + types_of[b] for a, b in re.findall(r" dot\(%([\w.\-]+), %([\w.\-]+)\)", text)
    ]
    assert sorted(operands) == ["f8e4m3fn x f8e4m3fn", "f8e4m3fn x f8e5m2", "f8e5m2 x f8e4m3fn"]


@needs_tpu
def test_tiny_step_on_v5e_4_uses_splash_kernels(tiny_bf16):
    target = compile_targets.parse_target("v5e-4")
    report = target_plan.plan_on_target(
        tiny_bf16, target, compile_targets.target_devices(target), (1, 4, 1), with_estimate=False
    )
    layers = tiny_bf16.model.n_layers
    for kernel in ("fwd_segmented_residuals", "dq_segmented_no_residuals", "dkv_segmented_no_residuals"):
        assert report["kernels"][f"splash_mha_{kernel}"] == layers
    assert report["collectives"]["all-reduce"]["ops"] >= 1  # fsdp 4: the gradient reduction at least
    assert (
        report["fits"]
        and report["params_gb"] + report["optimizer_gb"] < report["total_gb"] < report["hbm_gb"] == 16
    )
    assert "est_step_seconds" not in report


@needs_tpu
def test_tpu7x_compiles_with_two_devices_per_chip(tiny_bf16):
    """TPU7x (Ironwood): eight devices for four chips, 192 GiB per chip, the step's kernels in the program."""
    target = compile_targets.parse_target("tpu7x-8")
    devices = compile_targets.target_devices(target)
    assert len(devices) == 8 and {d.device_kind for d in devices} == {"TPU7x"}
    report = target_plan.plan_on_target(tiny_bf16, target, devices, (1, 8, 1), with_estimate=False)
    assert report["kernels"] and report["fits"] and report["hbm_gb"] == pytest.approx(103.08, abs=0.01)


@needs_tpu
def test_a_v5p_cube_is_16_hosts_and_its_fsdp_step_gathers_weights_with_all_gather(tiny_bf16):
    """Described as 8 hosts of 8 chips without wraparound, the TPU compiler turned every all-gather of this step
    into an all-reduce of a zero-padded buffer (docs/accelerators.md "Targets")."""
    target = compile_targets.parse_target("v5p-128")
    devices = compile_targets.target_devices(target)
    assert len({d.process_index for d in devices}) == 16
    rows = dataclasses.replace(tiny_bf16.train, batch_plan=((0, 64 * tiny_bf16.data.seq_len),))
    report = target_plan.plan_on_target(
        tiny_bf16.replace(train=rows), target, devices, (1, 64, 1), with_estimate=False
    )
    assert report["collectives"]["all-gather"]["ops"] >= tiny_bf16.model.n_layers


@pytest.mark.slow
@needs_tpu
def test_tiny_plan_on_v5e_4_writes_the_json_with_the_step_estimate(tiny_bf16, tmp_path):
    target = compile_targets.parse_target("v5e-4")
    devices = compile_targets.target_devices(target)
    path = str(tmp_path / "plan.json")
    lines = list(target_plan.target_lines(tiny_bf16, "tiny", target, devices, [(1, 4, 1)], 0, path))
    assert (
        lines[0].startswith("tiny on v5e-4 (4 x TPU v5 lite, TPU compiler)") and lines[-1] == f"wrote {path}"
    )
    (report,) = json.load(open(path))
    keys = "target devices mesh params_gb optimizer_gb temps_gb total_gb hbm_gb fits kernels collectives"
    assert set(keys.split()) | {"est_step_seconds", "est_mfu"} <= set(report)
    assert 0 < report["est_mfu"] < 1 and report["est_step_seconds"] > report["attention_seconds"] > 0


@pytest.mark.slow
@needs_tpu
def test_step_estimate_scaled_from_four_compiles_matches_the_unrolled_step(tiny_bf16):
    """4 layers, 2 microbatches of 8 rows: scaled from 1-2 layers x 1-2 microbatches' rows, against the same
    work compiled with 4 unrolled layers in one pass over 16 rows (no loop)."""
    devices = compile_targets.target_devices(compile_targets.parse_target("v5e-4"))
    config = tiny_bf16.replace(model=tiny_bf16.model.replace(n_layers=4))
    points = target_plan.estimate_points(config, devices, (1, 4, 1), 8, "splash")
    one_pass = dataclasses.replace(config.train, microbatch_size=0, loss_chunk_tokens=16 * 128)
    unrolled = target_plan.plan_run(
        config.replace(train=one_pass), (1, 4, 1), devices=devices, attention_impl="splash"
    )
    reference = target_plan._roofline(unrolled.lower_train_step(16).compile())
    flops = target_plan.scaled({k: v[0] for k, v in points.items()}, 4, 2)
    seconds = target_plan.scaled({k: v[1] for k, v in points.items()}, 4, 2)
    assert flops == pytest.approx(reference[0], rel=1e-3)
    assert seconds == pytest.approx(reference[1], rel=0.05)
    # the step as the loop runs it (scanned layers, 2 microbatches): its loops hide work from the cost analysis
    looped = dataclasses.replace(config.train, microbatch_size=8)
    model = config.model.replace(scan_layers=True)
    scanned = target_plan.plan_run(
        config.replace(model=model, train=looped), (1, 4, 1), devices=devices, attention_impl="splash"
    )
    assert scanned.lower_train_step(16).compile().cost_analysis()["flops"] < 0.5 * reference[0]
