"""benchmarks.trace_profile: a GPU trace's kernels summed per HLO op, part and kind, and the GEMMs against the peak."""

import glob
import gzip
import json
import os

import jax
import jax.numpy as jnp
import pytest

from benchmarks import trace_profile

# A compiled step in the shape XLA:GPU prints it: a cuBLAS GEMM of the MLP inside the layers' while loop (4
# trips), cuDNN attention forward and backward, a Triton GEMM of the logits, the optimizer's loop fusion and a
# transpose. vocab 1000, mlp_hidden 96, seq 64.
HLO = """HloModule jit_train_step, is_scheduled=true

%fused_transpose (param_0.1: bf16[8,16]) -> bf16[16,8] {
  %param_0.1 = bf16[8,16]{1,0} parameter(0)
  ROOT %transpose.1 = bf16[16,8]{1,0} transpose(%param_0.1), dimensions={1,0}
}

%triton_gemm_computation (param_0.2: bf16[64,32], param_1.2: bf16[32,1000]) -> f32[64,1000] {
  %param_0.2 = bf16[64,32]{1,0} parameter(0)
  %param_1.2 = bf16[32,1000]{1,0} parameter(1)
  ROOT %dot.5 = f32[64,1000]{1,0} dot(%param_0.2, %param_1.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%fused_add (param_0.3: f32[32,96], param_1.3: f32[32,96]) -> f32[32,96] {
  %param_0.3 = f32[32,96]{1,0} parameter(0)
  %param_1.3 = f32[32,96]{1,0} parameter(1)
  ROOT %add.2 = f32[32,96]{1,0} add(%param_0.3, %param_1.3)
}

%body (p: (s32[], bf16[64,32])) -> (s32[], bf16[64,32]) {
  %p = (s32[], bf16[64,32]{1,0}) parameter(0)
  %x = bf16[64,32]{1,0} get-tuple-element(%p), index=1
  %w = bf16[32,96]{1,0} constant({...})
  %custom-call.1 = (bf16[64,96]{1,0}, s8[1024]{0}) custom-call(%x, %w), custom_call_target="__cublas$lt$matmul", metadata={op_name="jit(train_step)/jvp()/while/body/...d,df->...f/dot_general"}, backend_config={"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]}}}
  ROOT %t = (s32[], bf16[64,32]{1,0}) tuple(%i, %x)
}

ENTRY %main.1 (a: f32[32,96], b: f32[32,96], init: (s32[], bf16[64,32]), q: bf16[1,64,2,16], e: bf16[32,1000], tr: bf16[8,16]) -> f32[32,96] {
  %a = f32[32,96]{1,0} parameter(0)
  %b = f32[32,96]{1,0} parameter(1)
  %init = (s32[], bf16[64,32]{1,0}) parameter(2)
  %q = bf16[1,64,2,16]{3,2,1,0} parameter(3)
  %e = bf16[32,1000]{1,0} parameter(4)
  %tr = bf16[8,16]{1,0} parameter(5)
  %while.1 = (s32[], bf16[64,32]{1,0}) while(%init), condition=%cond, body=%body, metadata={op_name="jit(train_step)/jvp()/while"}, backend_config={"known_trip_count":{"n":"4"}}
  %h = bf16[64,32]{1,0} get-tuple-element(%while.1), index=1
  %custom-call.2 = (bf16[1,64,2,16]{3,2,1,0}, u8[0]{0}) custom-call(%q, %q, %q), custom_call_target="__cudnn$fmhaScaleBiasSoftmax", metadata={op_name="jit(train_step)/jvp()/attention"}
  %custom-call.3 = (bf16[1,64,2,16]{3,2,1,0}, u8[0]{0}) custom-call(%q, %q, %q), custom_call_target="__cudnn$fmhaScaleBiasSoftmaxBackward", metadata={op_name="jit(train_step)/transpose(jvp())/attention"}
  %triton_gemm_dot = f32[64,1000]{1,0} fusion(%h, %e), kind=kCustom, calls=%triton_gemm_computation, metadata={op_name="jit(train_step)/jvp()/logits"}, backend_config={"fusion_backend_config":{"kind":"__triton_gemm"}}
  %transpose_fusion = bf16[16,8]{1,0} fusion(%tr), kind=kInput, calls=%fused_transpose, metadata={op_name="jit(train_step)/jvp()/transpose"}
  ROOT %loop_add_fusion = f32[32,96]{1,0} fusion(%a, %b), kind=kLoop, calls=%fused_add, metadata={op_name="jit(train_step)/add"}
}
"""
PEAK = 1e11  # FLOP/s
# Per step (us from the step's start): (hlo_op, kernel, start, duration); "" is a copy without an op.
STEP = [
    *[("custom-call.1", "nvjet_tst_128x64_64x4", 10 * i, 10) for i in range(4)],
    ("custom-call.2", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop", 40, 20),
    ("custom-call.3", "cudnn_generated_fort_native_sdpa_sm90_flash_bprop", 60, 40),
    ("triton_gemm_dot", "triton_gemm_dot", 100, 20),
    ("loop_add_fusion", "loop_add_fusion", 130, 10),  # 120-130: idle
    ("transpose_fusion", "transpose_fusion", 140, 10),
    ("", "MemcpyD2D", 150, 10),
    ("while.1", "MemcpyD2H", 160, 5),
]


def write_trace(trace_dir) -> None:
    """A `<host>.trace.json.gz` as jax.profiler writes it: two steps 200 us apart on a device stream, the host's
    launches of the same ops (which carry hlo_op too) and a kernel of another program after them."""
    meta = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        {
            "ph": "M",
            "pid": 1,
            "tid": 13,
            "name": "thread_name",
            "args": {"name": "Stream #13(Kernel,MemcpyD2D)"},
        },
        {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/host:CUPTI"}},
        {"ph": "M", "pid": 2, "tid": 7, "name": "thread_name", "args": {"name": "Host Threads/7"}},
    ]
    events = []
    for base in (0, 200):
        for op, kernel, start, dur in STEP:
            args = {"hlo_op": op, "hlo_module": "jit_train_step"} if op else {}
            events.append(
                {"ph": "X", "pid": 1, "tid": 13, "ts": base + start, "dur": dur, "name": kernel, "args": args}
            )
            events.append(
                {
                    "ph": "X",
                    "pid": 2,
                    "tid": 7,
                    "ts": base + start,
                    "dur": 3,
                    "name": "cuLaunchKernel",
                    "args": args,
                }
            )
    events.append(
        {
            "ph": "X",
            "pid": 1,
            "tid": 13,
            "ts": 1000,
            "dur": 500,
            "name": "other",
            "args": {"hlo_op": "fusion.9"},
        }
    )
    folder = trace_dir / "plugins" / "profile" / "2026_12_06"
    folder.mkdir(parents=True)
    with gzip.open(folder / "gpu-host.trace.json.gz", "wt") as f:
        json.dump({"displayTimeUnit": "ns", "traceEvents": meta + events}, f)


def test_hlo_ops_gives_each_instruction_its_part_kind_and_gemm_flops_per_step():
    ops = trace_profile.hlo_ops(HLO, vocab=1000, mlp_hidden=96, seq=64)
    assert ops["custom-call.1"] == trace_profile.HloOp("mlp", "cublas_gemm", 4 * 2 * 64 * 96 * 32)  # 4 trips
    assert ops["triton_gemm_dot"] == trace_profile.HloOp("lm_head+loss", "triton_gemm", 2 * 64 * 1000 * 32)
    assert ops["custom-call.2"] == trace_profile.HloOp("attention", "cudnn_attention_fwd", 0.0)
    assert ops["custom-call.3"] == trace_profile.HloOp("attention", "cudnn_attention_bwd", 0.0)
    assert ops["loop_add_fusion"] == trace_profile.HloOp("optimizer", "loop_fusion", 0.0)
    assert ops["transpose_fusion"] == trace_profile.HloOp("other", "copy_transpose", 0.0)
    assert ops["while.1"] == trace_profile.HloOp("other", "control", 0.0)


def test_a_gpu_trace_is_summed_per_part_and_kind_with_the_idle_share_and_the_roofline(tmp_path):
    write_trace(tmp_path)
    events = trace_profile.op_events(trace_profile.trace_events(str(tmp_path)), on_device=True)
    assert len(events) == 2 * len(STEP) + 1  # the device stream's; the host's launches are left out
    r = trace_profile.summarize(trace_profile.hlo_ops(HLO, 1000, 96, 64), events, steps=2, peak=PEAK)
    # The steps span 0..365 us (the other program's kernel after them is left out); 155 us busy per step.
    assert r["traced_step_ms"] == pytest.approx(0.1825)
    assert r["busy_ms"] == pytest.approx(0.155) and r["op_ms"] == pytest.approx(0.155)
    assert r["idle_share"] == pytest.approx(1 - 310 / 365)
    assert r["parts"] == pytest.approx(
        {"optimizer": 0.01, "lm_head+loss": 0.02, "attention": 0.06, "mlp": 0.04, "other": 0.025}
    )
    assert r["kinds"] == pytest.approx(
        {
            "cublas_gemm": 0.04,
            "cudnn_attention_bwd": 0.04,
            "cudnn_attention_fwd": 0.02,
            "triton_gemm": 0.02,
            "copy_transpose": 0.02,  # the transpose fusion and the copy without an op
            "loop_fusion": 0.01,
            "control": 0.005,
        }
    )
    mlp_flops = 4 * 2 * 64 * 96 * 32
    assert r["gemm"]["mlp"] == pytest.approx(
        {
            "ms": 0.04,
            "tflops": mlp_flops / 40e-6 / 1e12,
            "of_peak": mlp_flops / 40e-6 / PEAK,
            "gap_ms": 0.04 - 1e3 * mlp_flops / PEAK,
        }
    )
    assert set(r["gemm"]) == {"mlp", "lm_head+loss"}
    assert r["gemm_tflop_per_step"] == pytest.approx((mlp_flops + 2 * 64 * 1000 * 32) / 1e12)
    first = r["top"][0]
    assert (first["op"], first["kernel"], first["kind"]) == (
        "custom-call.1",
        "nvjet_tst_128x64_64x4",
        "cublas_gemm",
    )
    assert [o["op"] for o in r["top"]][1:3] == ["custom-call.3", "custom-call.2"] and "tflops" not in r[
        "top"
    ][1]
    assert "(copy)" in [o["op"] for o in r["top"]]


def test_a_trace_without_device_streams_or_the_steps_ops_is_refused(tmp_path):
    write_trace(tmp_path)
    events = trace_profile.trace_events(str(tmp_path))
    host_only = [e for e in events if e["process"] == "/host:CUPTI"]
    with pytest.raises(ValueError, match=r"no event of a device stream .*/host:CUPTI/Host Threads/7"):
        trace_profile.op_events(host_only, on_device=True)
    with pytest.raises(ValueError, match="no event of the step's ops"):
        trace_profile.summarize({}, trace_profile.op_events(events, on_device=True), steps=2, peak=PEAK)
    with pytest.raises(
        FileNotFoundError, match=r"no \*.trace.json.gz or \*.xplane.pb under the trace directory"
    ):
        trace_profile.trace_events(str(tmp_path / "plugins" / "nothing"))


def test_the_json_trace_and_the_xplane_give_the_same_op_events(tmp_path):
    """A real CPU trace of a jitted matmul: read from its `<host>.trace.json.gz`, and from its `.xplane.pb` once
    the JSON is gone (a profiler that writes none)."""
    f = jax.jit(lambda a, b: jnp.tanh(a @ b))
    a = jnp.ones((128, 128))
    f(a, a).block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        f(a, a).block_until_ready()
    from_json = trace_profile.op_events(trace_profile.trace_events(str(tmp_path)), on_device=False)
    for path in glob.glob(f"{tmp_path}/**/*.trace.json.gz", recursive=True):
        os.remove(path)
    from_xplane = trace_profile.op_events(trace_profile.trace_events(str(tmp_path)), on_device=False)
    assert from_json and [e[:2] for e in from_json] == [e[:2] for e in from_xplane]
    assert [e[2:] for e in from_json] == pytest.approx([e[2:] for e in from_xplane], abs=1e-3)
