"""The memory plan on a real target: THE train step compiled by the TPU or GPU compiler for compile-only devices.

    target = parse_target("v5p-128")
    for line in target_lines(config, "apertus-8b", target, target_devices(target), [(1, 64, 1)], 1):
        print(line)

`apertus_jax.aot.memory_plan` assembles the run on the target's devices (`Run`: same shardings, donation and
microbatches as the loop) with the attention kernel a real run uses there, "splash" on TPU and "cudnn" on GPU
(the config's FP8 and remat settings as they are), and the target's compiler compiles it. Per device
(docs/accelerators.md):

  params, optimizer  from the shardings (exact)
  temporaries        `memory_analysis().temp_size_in_bytes` of the compiled step
  total              arguments + outputs - donated aliases + temporaries, against the device's HBM; when the
                     compiler itself refuses the program for memory, its one-line reason instead
  kernels            the custom kernels in the program: Mosaic kernels by name on TPU (splash_mha_*), the cuDNN
                     and cuBLAS custom calls on GPU (__cudnn$fmha*: a `Bias` in the name is the document mask
                     as a dense [B, 1, T, T] input)
  collectives        ops and GB of their results in the program text (a loop body's once)

TPU only, the step time: XLA's TPU cost analysis (`optimal_seconds`, a roofline per op) counts the body of a
loop once (scanned layers, microbatches, loss chunks). The estimate therefore compiles the step four more
times without loops (layers unrolled, one pass over the rows, the loss in one chunk), with 1 and 2 layers and 1
and 2 microbatches' rows, and extrapolates the
bilinear cost a + b L + M (c + d L) to the config's L layers and M microbatches (`scaled`). The splash kernel
declares no cost, so the attention core is added at the chip's peak rate (`attention_core_flops`); MFU is the
model FLOPs of the step (`apertus_jax.models.flops`, no remat) over the estimated time and the slice's peak.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from apertus_jax import files
from apertus_jax.aot.compile_targets import Target
from apertus_jax.aot.memory_plan import GB, collective_bytes, parse_mesh, plan_run, shard_bytes
from apertus_jax.models.flops import train_flops_per_token
from apertus_jax.train.config import RunConfig

KERNEL_BY_PLATFORM = {"tpu": "splash", "gpu": "cudnn"}
# libtpu's cost model gives -1 s for each ConcatBitcast (a layout-only join of slices): added back.
_UNKNOWN_COST_CALLS = ("ConcatBitcast",)
_MOSAIC_CALL = re.compile(r"%([\w.\-]+?)(?:\.\d+)? = [^\n]*custom_call_target=\"tpu_custom_call\"")
_CUSTOM_CALL = re.compile(r"custom_call_target=\"([^\"]+)\"")
_WHILE = re.compile(r"\swhile\(")


def kernels(hlo_text: str) -> dict[str, int]:
    """{kernel: count} of the custom kernels in compiled HLO text: Mosaic (Pallas TPU) kernels by instruction
    name without its numeric suffix (`splash_mha_fwd_segmented_residuals`), cuDNN and cuBLAS custom calls
    by target (`__cudnn$fmhaScaleBiasSoftmax`)."""
    found: dict[str, int] = {}
    names = _MOSAIC_CALL.findall(hlo_text)
    names += [c for c in _CUSTOM_CALL.findall(hlo_text) if c.startswith(("__cudnn", "__cublas"))]
    for name in names:
        found[name] = found.get(name, 0) + 1
    return dict(sorted(found.items()))


def attention_core_flops(config: RunConfig, rows: int) -> float:
    """FLOPs of the attention core (QK^T and PV, their gradients) of `rows` rows through every layer, causal
    half of the T x T square: forward 2 matmuls, flash backward 5 (scores recomputed, dP, dV, dQ, dK), plus the
    forward again under remat; each 2 T^2 H N / 2 FLOPs per row and layer."""
    model, t = config.model, config.data.seq_len
    matmuls = 2 + 5 + (2 if model.remat_policy != "none" else 0)
    return float(rows * model.n_layers * matmuls * t * t * model.head_dim * model.n_heads)


def _roofline(compiled) -> tuple[float, float]:
    """(flops, optimal_seconds) of a compiled TPU program without loops, the unknown-cost calls' -1 s each
    added back.

    Raises:
      ValueError: the program has a while loop (its body would be counted once).
    """
    cost = compiled.cost_analysis()
    text = compiled.as_text()
    if _WHILE.search(text):
        raise ValueError(
            "the step-time estimate found a loop left in a program compiled without scanned layers, "
            "microbatches or loss chunks (a loop in the optimizer?); plan without the estimate"
        )
    unknown = sum(c in _UNKNOWN_COST_CALLS for c in _CUSTOM_CALL.findall(text))
    return float(cost["flops"]), float(cost["optimal_seconds"]) + unknown


def scaled(costs: dict[tuple[int, int], float], layers: int, microbatches: int) -> float:
    """The bilinear cost a + b L + M (c + d L) through the four compiled points {(L, M): cost} at L, M in
    {1, 2}, at `layers` and `microbatches` (exact for costs linear in the layers and in the rows)."""
    c11, c21, c12, c22 = costs[1, 1], costs[2, 1], costs[1, 2], costs[2, 2]
    d = c22 - c21 - c12 + c11
    b, c = c21 - c11 - d, c12 - c11 - d
    a = c11 - b - c - d
    return a + b * layers + microbatches * (c + d * layers)


def estimate_points(
    run_config: RunConfig, devices: Sequence, mesh_shape: tuple[int, ...], rows: int, impl: str
) -> dict[tuple[int, int], tuple[float, float]]:
    """{(layers, microbatches): (flops, optimal_seconds)} per device of the step with 1 and 2 unrolled layers
    over one pass of 1 and 2 microbatches of `rows` rows, the loss in one chunk, on `mesh_shape` over `devices`
    (`scaled`): programs without loops.

    Raises:
      ValueError: a loop is left in a program (`_roofline`).
    """
    points = {}
    for layers in (1, 2):
        for micro in (1, 2):
            tokens = micro * rows * run_config.data.seq_len
            config = run_config.replace(
                model=run_config.model.replace(n_layers=layers, scan_layers=False),
                train=dataclasses.replace(
                    run_config.train,
                    microbatch_size=0,
                    batch_plan=((0, tokens),),
                    loss_chunk_tokens=tokens,
                ),
            )
            run = plan_run(config, mesh_shape, devices=devices, attention_impl=impl)
            points[layers, micro] = _roofline(run.lower_train_step(micro * rows).compile())
    return points


def estimate(
    run_config: RunConfig,
    target: Target,
    devices: Sequence,
    mesh_shape: tuple[int, ...],
    rows: int,
    micro: int,
) -> dict:
    """The TPU step-time estimate of the module docstring: `est_step_seconds`, `est_mfu`, `est_flops` (per
    device, attention core included), `attention_seconds` (the added attention core)."""
    impl = KERNEL_BY_PLATFORM[target.platform]
    points = estimate_points(run_config, devices, mesh_shape, rows, impl)
    layers = run_config.model.n_layers
    flops = scaled({k: v[0] for k, v in points.items()}, layers, micro)
    seconds = scaled({k: v[1] for k, v in points.items()}, layers, micro)
    context = (*mesh_shape, 1)[3]
    attention = (
        attention_core_flops(run_config, rows * micro) * context / len(devices) if impl == "splash" else 0.0
    )
    seconds += attention / target.peak_flops
    tokens = rows * micro * run_config.data.seq_len
    model_flops = train_flops_per_token(run_config.model, run_config.data.seq_len) * tokens
    return {
        "est_step_seconds": seconds,
        "est_mfu": model_flops / (seconds * len(devices) * target.peak_flops),
        "est_flops": flops + attention,
        "attention_seconds": attention / target.peak_flops,
    }


def _compiler_refusal(error: Exception) -> str | None:
    """The one-line reason of a compiler that refused a program for memory, else None."""
    text = str(error)
    if "RESOURCE_EXHAUSTED" not in text and "out of memory" not in text.lower():
        return None
    line = next((s for s in text.splitlines() if "memory" in s.lower()), text.splitlines()[0])
    return " ".join(line.split())[:300]


def check_mesh(target: Target, mesh_shape: tuple[int, ...]) -> None:
    """Raises ValueError (one line) unless the sizes of `mesh_shape` multiply to the target's device count."""
    if int(np.prod(mesh_shape)) != target.devices:
        raise ValueError(
            f"mesh {'x'.join(map(str, mesh_shape))} has {int(np.prod(mesh_shape))} devices but --target="
            f"{target.name} has {target.devices}; pass --meshes whose sizes multiply to {target.devices}"
        )


def target_meshes(config: RunConfig, target: Target, meshes: Sequence[str]) -> list[tuple[int, ...]]:
    """The mesh shapes of `meshes` ("DATAxFSDPxTENSOR[xCONTEXT]" each), or the config's `mesh` section over
    the target's devices when empty; each checked against the target (`check_mesh`).

    Raises:
      ValueError: a malformed mesh, or one whose device count is not the target's (one line).
    """
    shapes = [parse_mesh(m) for m in meshes] or [config.mesh.resolve(target.devices)]
    shapes = [s[:3] if len(s) == 4 and s[3] == 1 and not meshes else s for s in shapes]
    for shape in shapes:
        check_mesh(target, shape)
    return shapes


def plan_on_target(
    config: RunConfig,
    target: Target,
    devices: Sequence,
    mesh_shape: tuple[int, ...],
    rows_per_device: int = 0,
    with_estimate: bool = True,
    compiler_options: Mapping[str, str | bool | int] | None = None,
) -> dict:
    """THE train step of `config` for its largest batch, compiled for `target` on `mesh_shape` over its
    compile-only `devices` (module docstring); `with_estimate` (TPU) adds the step-time estimate;
    `compiler_options`: XLA options of this compile, as XLA_FLAGS names them without the dashes (e.g.
    {"xla_gpu_enable_triton_gemm": False}).

    Returns:
      {target, devices, mesh, params_gb, optimizer_gb, temps_gb, total_gb, hbm_gb, fits, kernels, collectives
      ({op: {ops, gb}}), batch_rows, microbatches, rows, compile_s}, `oom` (the compiler's line) when it refused
      the program for memory (then temps_gb and total_gb are None), and on TPU est_step_seconds, est_mfu,
      est_flops, attention_seconds.

    Raises:
      ValueError: a mesh whose device count is not the target's (`check_mesh`), a config the mesh does not fit
        (one line).
    """
    check_mesh(target, mesh_shape)
    mesh = "x".join(map(str, mesh_shape))
    run = plan_run(config, mesh_shape, rows_per_device, devices, KERNEL_BY_PLATFORM[target.platform])
    batch_rows = max(tokens for _, tokens in run.config.train.batch_plan) // run.config.data.seq_len
    micro = run.num_microbatches(batch_rows)
    report = {
        "target": target.name,
        "devices": len(devices),
        "mesh": mesh,
        "params_gb": shard_bytes(run.spec.abstract["params"]) / GB,
        "optimizer_gb": shard_bytes(run.spec.abstract["opt_state"]) / GB,
        "hbm_gb": target.hbm_gb,
        "batch_rows": batch_rows,
        "microbatches": micro,
        "rows": batch_rows // micro,
    }
    start = time.time()
    try:
        compiled = run.lower_train_step(batch_rows).compile(compiler_options)
    except Exception as error:  # noqa: BLE001 - only the compiler's out-of-memory refusal is a result
        refusal = _compiler_refusal(error)
        if refusal is None:
            raise
        return {
            **report,
            "temps_gb": None,
            "total_gb": None,
            "fits": False,
            "oom": refusal,
            "kernels": {},
            "collectives": {},
            "compile_s": time.time() - start,
        }
    memory = compiled.memory_analysis()
    total = (
        memory.argument_size_in_bytes
        + memory.output_size_in_bytes
        - memory.alias_size_in_bytes
        + memory.temp_size_in_bytes
    )
    text = compiled.as_text()
    report.update(
        temps_gb=memory.temp_size_in_bytes / GB,
        total_gb=total / GB,
        fits=total / GB <= target.hbm_gb,
        kernels=kernels(text),
        collectives={k: {"ops": n, "gb": b / GB} for k, (n, b) in collective_bytes(text).items() if n},
        compile_s=time.time() - start,
    )
    if with_estimate and target.platform == "tpu":
        report.update(estimate(run.config, target, devices, mesh_shape, report["rows"], micro))
    return report


def _cells(r: dict) -> list[str]:
    """The table cells of one `plan_on_target` report."""
    gb = lambda key: "-" if r[key] is None else f"{r[key]:.2f}"  # noqa: E731
    fits = "yes" if r["fits"] else ("no: " + r["oom"] if "oom" in r else "no")
    used = ", ".join(f"{v['ops']} {k} ({v['gb']:.2f})" for k, v in r["collectives"].items()) or "none"
    cells = [
        f"{r['mesh']} ({r['devices']} dev; batch {r['batch_rows']} rows = {r['microbatches']} x {r['rows']})",
        gb("params_gb"),
        gb("optimizer_gb"),
        gb("temps_gb"),
        gb("total_gb"),
        f"{r['hbm_gb']:.1f}",
        fits,
        ", ".join(f"{k} x{n}" for k, n in r["kernels"].items()) or "none",
        used,
    ]
    if "est_step_seconds" in r:
        cells += [f"{r['est_step_seconds']:.3g}", f"{r['est_mfu']:.1%}"]
    return cells


def target_lines(
    config: RunConfig,
    name: str,
    target: Target,
    devices: Sequence,
    shapes: Sequence[tuple[int, ...]],
    rows_per_device: int = 0,
    json_path: str = "",
    with_estimate: bool = True,
) -> Iterator[str]:
    """The plan of `config` (model label `name`) on `target` for each mesh of `shapes` as a markdown table
    (per device, GB = 1e9 bytes), a row yielded as each mesh compiles; with `json_path`, the reports
    (`plan_on_target`) as a JSON list written there after the last; `with_estimate` False leaves out the TPU
    step-time estimate (its four extra compiles): memory, kernels and collectives only.

    Raises:
      ValueError: as `plan_on_target`.
    """
    kernel = KERNEL_BY_PLATFORM[target.platform]
    yield (
        f"{name} on {target.name} ({len(devices)} x {devices[0].device_kind}, {target.platform.upper()} compiler): "
        f"the training loop's own step, seq_len {config.data.seq_len}, compute {config.model.dtype}, remat "
        f"{config.model.remat_policy}, {kernel} attention{', FP8' if config.model.fp8 else ''}; GB = 1e9 bytes per device"
    )
    header = [
        "mesh (data x fsdp x tensor [x context])",
        "params",
        "optimizer",
        "temporaries",
        "total",
        "HBM",
        "fits",
        "kernels",
        "collectives (GB)",
    ]
    estimated = with_estimate and target.platform == "tpu"
    if estimated:
        header += ["est. step s", "est. MFU"]
    yield "| " + " | ".join(header) + " |"
    yield "|" + "---|" * len(header)
    reports = []
    for shape in shapes:
        report = plan_on_target(config, target, devices, shape, rows_per_device, estimated)
        reports.append(report)
        yield "| " + " | ".join(_cells(report)) + f" |  (compiled in {report['compile_s']:.0f} s)"
    if estimated:
        yield (
            "est.: the TPU compiler's roofline of the whole step (layers and microbatches scaled from four "
            "unrolled compiles), the splash attention core added at peak; MFU of the model FLOPs."
        )
    if json_path:
        files.write_json(json_path, reports, indent=1)
        yield f"wrote {json_path}"
