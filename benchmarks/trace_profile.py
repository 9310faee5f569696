"""Where a train step's time goes, the library of `benchmarks.profile`: a `jax.profiler` trace of the compiled step,
summed per XLA op, part and kind.

    python -m benchmarks.profile --config=bench-18m-apertus [--steps 3 --top 15 --batch 4 --seq 256]
    python -m benchmarks.profile --accelerator_config=1b|8b-slice [--dry_run] [--json=PATH]

`--accelerator_config` profiles the step of `benchmarks.accelerator` (bf16, the backend's fused attention,
scanned layers; `benchmarks.step.accelerator_setup`) instead of a model preset's. The step is compiled once;
`--warmup` untimed calls, `--steps` timed calls (the step's time and MFU, untraced) and `--steps` traced calls
follow. The trace is read from the `<host>.trace.json.gz` that `jax.profiler` writes (Chrome trace format; no
TensorBoard plugin needed), else from its `<host>.xplane.pb`. On a GPU the op events are the kernels and copies of the device's streams, whose
`hlo_op` names their HLO instruction; elsewhere (CPU) the XLA threads' op events. While a trace runs, XLA:GPU
launches the kernels of its command buffers (CUDA graphs) one by one, so the traced step is slower than the
untimed one: the idle share is of the traced step.

Each op is attributed to one part of the model by its HLO instruction:
  optimizer  -- outside the gradient computation (neither `jvp(` nor the microbatch loop's `while/body` in the
                op's name stack): clip, AdamW/AdEMAMix update;
  lm_head+loss -- any operand or result with a vocab-sized dimension (logits matmuls, log-softmax, the
                  embedding gather/scatter);
  attention  -- a `[.., T, T]` operand or result (scores, softmax, values), a q/k/v/o einsum or a cuDNN
                attention call;
  mlp        -- an `mlp_hidden`-sized dimension;
  other      -- norms, RoPE, residuals, copies;
and to one kind (`op_kind`): cublas_gemm, triton_gemm, cudnn_gemm, xla_gemm (a dot XLA emits itself, as on
CPU), cudnn_attention_fwd/_bwd, triton_fusion, loop_fusion, input_fusion, other_fusion, copy_transpose,
collective, control (a while loop's own events: on CPU, the one enclosing its body's is left out), other. A GEMM's FLOPs come from its dot's shapes (2 x result elements x contracted size) times
the trips of the while loops around it; its achieved TFLOP/s against the device's dense peak
(`apertus_jax.train.metrics.peak_flops_per_device`: 989 TFLOP/s bf16 on an H100/H200) gives its gap to the
roofline, the milliseconds it takes beyond what the peak would need. Times are per step; the op times are
summed kernel (CPU: thread) time, which overlapping streams or threads make exceed the wall time.
"""

import bisect
import collections
import dataclasses
import glob
import gzip
import importlib.metadata
import json
import math
import os
import platform
import re
import statistics
import tempfile
import time
import warnings

import jax

from apertus_jax.models import flops
from apertus_jax.train.metrics import mfu, peak_flops_per_device
from benchmarks import step as train_step

PARTS = ("optimizer", "lm_head+loss", "attention", "mlp", "other")
GEMM_KINDS = ("cublas_gemm", "triton_gemm", "cudnn_gemm", "xla_gemm")
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all")

_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (\(.*?\)|\S+) ([\w\-]+)\(")
_COMPUTATION = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) \(.*\{$")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_CALLED = re.compile(r"\b(?:calls|body|to_apply)=%([\w.\-]+)")
_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_TARGET = re.compile(r'custom_call_target="([^"]*)"')
_FUSION_KIND = re.compile(r"kind=(k\w+)")
_BACKEND_KIND = re.compile(r'"kind":"([^"]*)"')
_ARRAY = re.compile(r"\w+\[([\d,]*)\]")
_OPERANDS = re.compile(r"\(%([\w.\-]+)")
_LHS_CONTRACTING = re.compile(r"lhs_contracting_dims=\{([\d,]*)\}")
_GEMM_CONTRACTING = re.compile(r'"lhs_contracting_dimensions":\[([^\]]*)\]')
_ATTENTION_EINSUMS = ("btd,dnh->btnh", "btd,dkh->btkh", "btnh,nhd->btd", "btkgh,bskh", "bkgts,bskh")


@dataclasses.dataclass(frozen=True)
class HloOp:
    """One instruction of the compiled step: its part, kind, and FLOPs per step (its dots' FLOPs times the trips
    of the while loops around it; 0 for an op without a dot)."""

    part: str
    kind: str
    flops: float


def _dims(shape: str) -> list[int]:
    """The dimensions of the first array of an HLO shape ("bf16[4096,2048]{1,0}" -> [4096, 2048])."""
    found = _ARRAY.search(shape)
    return [int(d) for d in found.group(1).split(",") if d] if found else []


def _dot_flops(line: str, shapes: dict[str, str]) -> float:
    """2 x result elements x contracted size of a dot, or of a cuBLAS/cuDNN GEMM call (its first result); 0 if
    the line is neither."""
    contracting = _LHS_CONTRACTING.search(line) or _GEMM_CONTRACTING.search(line)
    operands = _OPERANDS.search(line)
    match = _INSTRUCTION.match(line)
    if not (contracting and operands and match):
        return 0.0
    lhs = _dims(shapes.get(operands.group(1), ""))
    axes = [int(a.strip('" ')) for a in contracting.group(1).split(",") if a.strip('" ')]
    if not lhs or any(a >= len(lhs) for a in axes):
        return 0.0
    return 2.0 * math.prod(_dims(match.group(2))) * math.prod(lhs[a] for a in axes)


def op_kind(name: str, opcode: str, line: str, has_dot: bool) -> str:
    """The kind of an HLO instruction (module docstring): from its opcode, custom-call target, fusion kind,
    backend kind and name, and whether its fused computation holds a dot."""
    if opcode == "custom-call":
        target = (_TARGET.search(line) or [None, ""])[1]
        if "fmha" in target:
            return "cudnn_attention_bwd" if "Backward" in target else "cudnn_attention_fwd"
        if "cublas" in target:
            return "cublas_gemm"
        return "other"
    if opcode == "dot":
        return "xla_gemm"
    if opcode.removesuffix("-start").removesuffix("-done") in COLLECTIVES:
        return "collective"
    if opcode in ("copy", "transpose", "copy-start", "copy-done"):
        return "copy_transpose"
    if opcode in ("while", "conditional", "call"):
        return "control"
    if opcode != "fusion":
        return "other"
    backend = (_BACKEND_KIND.search(line) or [None, ""])[1]
    if has_dot:
        for library in ("cublas", "cudnn", "triton"):
            if library in backend:
                return f"{library}_gemm"
        return "xla_gemm"
    if "triton" in backend:
        return "triton_fusion"
    if "transpose" in name or name.startswith(("copy", "wrapped_copy")):
        return "copy_transpose"
    kind = (_FUSION_KIND.search(line) or [None, ""])[1]
    return {"kLoop": "loop_fusion", "kInput": "input_fusion"}.get(kind, "other_fusion")


def hlo_ops(hlo_text: str, vocab: int, mlp_hidden: int, seq: int) -> dict[str, HloOp]:
    """HLO instruction name -> `HloOp` (part, kind, FLOPs per step) of a compiled program's text."""
    vocab_dim = re.compile(rf"[\[,]{vocab}[\],]")
    mlp_dim = re.compile(rf"[\[,]{mlp_hidden}[\],]")
    scores_dim = re.compile(rf",{seq},{seq}\]")
    computations: dict[str, list[str]] = {}
    current = None
    for line in hlo_text.splitlines():
        header = _COMPUTATION.match(line)
        if header:
            current = computations.setdefault(header.group(1), [])
        elif current is not None and _INSTRUCTION.match(line):
            current.append(line)
    shapes = {
        m.group(1): m.group(2) for lines in computations.values() for m in map(_INSTRUCTION.match, lines)
    }
    # Executions per step of each computation's instructions: the product of the trip counts of the while
    # loops around it (a computation reached otherwise runs as often as its caller).
    trips: dict[str, int] = {}

    def visit(computation: str, count: int) -> None:
        trips[computation] = max(trips.get(computation, 0), count)
        for line in computations.get(computation, ()):
            trip = _TRIP_COUNT.search(line) if " while(" in line else None
            for called in _CALLED.findall(line):
                if called not in trips:
                    visit(called, count * (int(trip.group(1)) if trip and "body=%" + called in line else 1))

    entry = re.search(r"^ENTRY %?([\w.\-]+)", hlo_text, re.MULTILINE)
    visit(entry.group(1) if entry else next(iter(computations), ""), 1)
    dot_flops: dict[str, float] = {}

    def computation_flops(computation: str) -> float:
        """The FLOPs of the dots of a fused computation, those of the fusions nested in it included."""
        if computation not in dot_flops:
            dot_flops[computation] = sum(
                _dot_flops(line, shapes)
                + sum(map(computation_flops, _CALLED.findall(line) if " fusion(" in line else ()))
                for line in computations.get(computation, ())
            )
        return dot_flops[computation]

    ops = {}
    for computation, lines in computations.items():
        for line in lines:
            name, _, opcode = _INSTRUCTION.match(line).groups()
            called = _CALLED.findall(line) if opcode == "fusion" else []
            op_flops = _dot_flops(line, shapes) + sum(map(computation_flops, called))
            kind = op_kind(name, opcode, line, bool(sum(map(computation_flops, called))))
            op_name = (_OP_NAME.search(line) or [None, ""])[1]
            # The shapes of the result and the operands appear before the metadata.
            operand_shapes = " ".join(
                shapes.get(o, "") for o in re.findall(r"%([\w.\-]+)", line.split("=", 1)[1])
            )
            shape_text = line.split("metadata=")[0] + operand_shapes
            if "jvp(" not in op_name and "while/body" not in op_name and "jit(" in op_name:
                part = "optimizer"
            elif vocab_dim.search(shape_text):
                part = "lm_head+loss"
            elif (
                scores_dim.search(shape_text)
                or kind.startswith("cudnn_attention")
                or any(e in op_name for e in _ATTENTION_EINSUMS)
            ):
                part = "attention"
            elif mlp_dim.search(shape_text):
                part = "mlp"
            else:
                part = "other"
            ops[name] = HloOp(part, kind, op_flops * trips.get(computation, 1) if kind in GEMM_KINDS else 0.0)
    return ops


def trace_events(trace_dir: str) -> list[dict]:
    """The complete events of the trace `jax.profiler.trace` wrote under TRACE_DIR, each a dict of the Chrome
    trace format ("name", "ts" and "dur" in us, "args": the event's stats) with `process` and `thread`: the
    names of its process (plane) and thread (line). Read from the `<host>.trace.json.gz`, or, where a profiler
    writes none, from the `<host>.xplane.pb` (`jax.profiler.ProfileData`).

    Raises:
      FileNotFoundError: neither file under TRACE_DIR (naming the files there).
    """
    found = sorted(glob.glob(os.path.join(trace_dir, "**", "*"), recursive=True))
    traces = [p for p in found if p.endswith(".trace.json.gz")]
    if traces:
        with gzip.open(traces[-1], "rt") as f:
            events = json.load(f)["traceEvents"]
        processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
        threads = {
            (e["pid"], e.get("tid")): e["args"]["name"] for e in events if e.get("name") == "thread_name"
        }
        return [
            {**e, "process": processes.get(e["pid"], ""), "thread": threads.get((e["pid"], e.get("tid")), "")}
            for e in events
            if e.get("ph") == "X"
        ]
    planes = [p for p in found if p.endswith(".xplane.pb")]
    if not planes:
        names = [os.path.relpath(p, trace_dir) for p in found]
        raise FileNotFoundError(
            f"no *.trace.json.gz or *.xplane.pb under the trace directory {trace_dir}: {names}"
        )
    # jaxlib 0.12 builds its `event_stats` type on first use without a __module__; Python 3.12 warns of that
    # while nanobind builds it, and a process that makes DeprecationWarning an error aborts there.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "builtin type event_stats has no __module__", DeprecationWarning)
        return [
            {
                "name": event.name,
                "ts": event.start_ns / 1e3,
                "dur": event.duration_ns / 1e3,
                "args": dict(event.stats),
                "process": plane.name,
                "thread": line.name,
            }
            for plane in jax.profiler.ProfileData.from_file(planes[-1]).planes
            for line in plane.lines
            for event in line.events
        ]


def op_events(events: list[dict], on_device: bool) -> list[tuple[str, str, float, float]]:
    """(HLO op, kernel name, start us, duration us) of the ops' events of `trace_events` on the first device:
    `on_device` (a GPU) the events of its streams (the first process `/device:...`, threads `Stream #...`; a
    copy without `hlo_op` has op ""), else (CPU) every event with an `hlo_op` of device ordinal 0.

    Raises:
      ValueError: `on_device` and no stream event (naming the processes and threads of the trace).
    """
    if not on_device:
        chosen = [
            e
            for e in events
            if "hlo_op" in e.get("args", {}) and str(e["args"].get("device_ordinal", 0)) == "0"
        ]
    else:
        chosen = [
            e for e in events if e["process"].startswith("/device:") and e["thread"].startswith("Stream")
        ]
        if not chosen:
            seen = sorted({f"{e['process']}/{e['thread']}" for e in events})
            raise ValueError(
                f"the trace has no event of a device stream (/device:*, Stream #*); it has {seen}"
            )
        first = min(e["process"] for e in chosen)
        chosen = [e for e in chosen if e["process"] == first]
    return [(e.get("args", {}).get("hlo_op", ""), e["name"], float(e["ts"]), float(e["dur"])) for e in chosen]


def _busy_us(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals."""
    busy, end = 0.0, -math.inf
    for start, stop in sorted(intervals):
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    return busy


def summarize(
    ops: dict[str, HloOp], events: list[tuple[str, str, float, float]], steps: int, peak: float
) -> dict:
    """Per step: `traced_step_ms` (first to last op event of the step's ops, over `steps`), `busy_ms` (covered by
    an op event), `idle_share` (1 - busy / traced), `op_ms` (summed op time), `parts` and `kinds` ({name: ms}),
    `gemm` per part ({part: ms, tflops, of_peak, gap_ms}), and `top` ops (largest first: op, kernel, part,
    kind, ms, share of `op_ms`, tflops and of_peak for a GEMM). `peak` is the device's FLOP/s; events of ops
    not in `ops` (other programs) are left out, a device copy without an op ("") counts as kind copy_transpose.

    Raises:
      ValueError: no event of an op of `ops` (the trace is of another program, or empty).
    """
    mine = [e for e in events if e[0] in ops or e[0] == ""]
    if not any(e[0] in ops for e in mine):
        raise ValueError("the trace has no event of the step's ops: nothing ran under the profiler")
    start = min(e[2] for e in mine if e[0] in ops)
    end = max(e[2] + e[3] for e in mine if e[0] in ops)
    mine = [e for e in mine if e[2] >= start and e[2] + e[3] <= end]
    # A while loop's event on CPU encloses its body's op events: only its own time (a GPU's copy of the loop's
    # predicate) is kept.
    starts = sorted(e[2] for e in mine)
    mine = [
        e
        for e in mine
        if e[0] not in ops
        or ops[e[0]].kind != "control"
        or bisect.bisect_right(starts, e[2] + e[3]) - bisect.bisect_right(starts, e[2]) == 0
    ]
    per_op: dict[str, float] = collections.Counter()
    kernels: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for op, kernel, _, dur in mine:
        per_op[op] += dur / 1e3 / steps
        kernels[op][kernel] += dur
    unattributed = HloOp("other", "copy_transpose", 0.0)
    of = lambda op: ops.get(op, unattributed)  # noqa: E731
    op_ms = sum(per_op.values())
    parts, kinds = collections.Counter(), collections.Counter()
    gemm_ms, gemm_flops = collections.Counter(), collections.Counter()
    for op, ms in per_op.items():
        parts[of(op).part] += ms
        kinds[of(op).kind] += ms
        if of(op).flops:
            gemm_ms[of(op).part] += ms
            gemm_flops[of(op).part] += of(op).flops

    def roofline(ms: float, flop: float) -> dict:
        tflops = flop / (ms / 1e3) / 1e12
        return {"tflops": tflops, "of_peak": tflops * 1e12 / peak, "gap_ms": ms - 1e3 * flop / peak}

    top = []
    for op, ms in sorted(per_op.items(), key=lambda kv: -kv[1]):
        entry = {"op": op or "(copy)", "kernel": kernels[op].most_common(1)[0][0], "part": of(op).part}
        entry |= {"kind": of(op).kind, "ms": ms, "share": ms / op_ms}
        top.append(entry | (roofline(ms, of(op).flops) if of(op).flops else {}))
    traced_ms = (end - start) / 1e3 / steps
    busy_ms = _busy_us([(e[2], e[2] + e[3]) for e in mine]) / 1e3 / steps
    return {
        "traced_step_ms": traced_ms,
        "busy_ms": busy_ms,
        "idle_share": 1 - busy_ms / traced_ms,
        "op_ms": op_ms,
        "parts": {p: parts[p] for p in PARTS},
        "kinds": dict(kinds.most_common()),
        "gemm": {p: {"ms": gemm_ms[p], **roofline(gemm_ms[p], gemm_flops[p])} for p in PARTS if gemm_ms[p]},
        "gemm_tflop_per_step": sum(gemm_flops.values()) / 1e12,
        "top": top,
    }


def profile(
    config_name: str,
    steps: int = 3,
    batch: int = 4,
    seq: int = 256,
    dtype: str = "float32",
    optimizer: str = "adamw",
    warmup: int = 2,
    **model_overrides,
) -> dict:
    """Compiles the step of preset `config_name`, runs `warmup` untimed, `steps` timed and `steps` traced calls.

    Returns `summarize`'s dict of the first device (all ops; each device runs the same program on its share of
    the batch) plus config, batch (all devices'), seq, dtype, optimizer, steps, `step_ms` (median of the timed
    calls), `tokens_per_s`, `mfu` (against `peak_tflops`, one device's dense peak), `model_tflop_per_step` (one
    device's share, `apertus_jax.models.flops`), `compile_s`, `device_kind`, `devices`, `jax`, `flax`,
    `python`, `cpus`.

    Raises:
      ValueError: `steps` < 1 or `warmup` < 0; as `benchmarks.step.build`; no op event in the trace.
    """
    if steps < 1 or warmup < 0:
        raise ValueError(f"--steps={steps} must be >= 1 and --warmup={warmup} >= 0")
    model_config, step, state, device_batch = train_step.build(
        config_name, batch, seq, dtype, optimizer, **model_overrides
    )
    params, opt_state = state["params"], state["opt_state"]
    start = time.perf_counter()
    compiled = step.lower(params, opt_state, device_batch, None).compile()
    compile_s = time.perf_counter() - start
    ops = hlo_ops(compiled.as_text(), model_config.vocab_size, model_config.mlp_hidden, seq)
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        params, opt_state, metrics = compiled(params, opt_state, device_batch, None)
        jax.block_until_ready((params, opt_state, metrics))
        if i >= warmup:
            times.append(time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as trace_dir:
        with jax.profiler.trace(trace_dir):
            for _ in range(steps):
                params, opt_state, metrics = compiled(params, opt_state, device_batch, None)
                jax.block_until_ready((params, opt_state, metrics))
        events = op_events(trace_events(trace_dir), jax.default_backend() != "cpu")
    peak, devices = peak_flops_per_device(), jax.device_count()
    step_s = statistics.median(times)
    flops_per_token = flops.train_flops_per_token(model_config, seq)
    return {
        "config": config_name,
        "batch": batch,
        "seq": seq,
        "dtype": dtype,
        "optimizer": optimizer,
        "steps": steps,
        "step_ms": 1e3 * step_s,
        "tokens_per_s": batch * seq / step_s,
        "mfu": mfu(batch * seq / step_s, flops_per_token, devices, peak),
        "peak_tflops": peak / 1e12,
        "model_tflop_per_step": flops_per_token * batch * seq / devices / 1e12,
        "compile_s": compile_s,
        "device_kind": jax.devices()[0].device_kind,
        "devices": jax.device_count(),
        "jax": jax.__version__,
        "flax": importlib.metadata.version("flax"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        **summarize(ops, events, steps, peak),
    }


def format_profile(r: dict, top: int) -> str:
    """The readable tables of `profile`'s result: the step, per part, per kind, the GEMMs per part, the `top` ops."""
    op_ms = r["op_ms"]
    lines = [
        f"{r['config']} {r['dtype']} {r['optimizer']} batch={r['batch']} seq={r['seq']} on {r['devices']} x "
        f"{r['device_kind']}: step {r['step_ms']:.1f} ms untraced (MFU {100 * r['mfu']:.1f}% of "
        f"{r['peak_tflops']:.4g} TFLOP/s), traced {r['traced_step_ms']:.1f} ms, ops {op_ms:.1f} ms, "
        f"idle {100 * r['idle_share']:.1f}% of the traced step",
        f"{'part':<16} {'ms':>9} {'share':>6}   {'GEMM ms':>9} {'TFLOP/s':>8} {'of peak':>7} {'gap ms':>8}",
    ]
    for part, ms in r["parts"].items():
        g = r["gemm"].get(part)
        gemm = f"{g['ms']:9.1f} {g['tflops']:8.1f} {100 * g['of_peak']:6.1f}% {g['gap_ms']:8.1f}" if g else ""
        lines.append(f"{part:<16} {ms:9.1f} {100 * ms / op_ms:5.1f}%   {gemm}")
    lines.append(f"{'kind':<22} {'ms':>9} {'share':>6}")
    lines += [f"{kind:<22} {ms:9.1f} {100 * ms / op_ms:5.1f}%" for kind, ms in r["kinds"].items()]
    lines.append(f"top {top} ops: op, part, kind, ms, share, TFLOP/s and of peak for a GEMM, kernel")
    for o in r["top"][:top]:
        gemm = f"{o['tflops']:7.1f} {100 * o['of_peak']:5.1f}%" if "tflops" in o else " " * 14
        lines.append(
            f"  {o['op'][:36]:<36} {o['part']:<13} {o['kind']:<20} {o['ms']:8.2f} {100 * o['share']:5.1f}% "
            f"{gemm} {o['kernel'][:60]}"
        )
    return "\n".join(lines)
