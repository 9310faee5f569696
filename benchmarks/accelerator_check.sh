#!/usr/bin/env bash
# The accelerator check, one H100/H200 GPU, under 10 minutes (each stage has its own time limit):
#   1. packed-segment attention parity, cuDNN against the XLA reference (values, gradients, isolation);
#   2. one layer's attention with the document mask through each kernel, 8B heads, demo-corpus document lengths,
#      at 4,096 and (the cuDNN kernels) 32,768 tokens: time, temporaries, error;
#   3. train-step throughput of the 1b and 8b-slice configs in bf16 (tokens/s/device, MFU, memory, kernels);
#   4. the demo run (`experiments.pretrain`, configs/runs/tiny_demo.py): the whole loop on the accelerator;
#   5. the configs of 3 with FP8 projections, with XLA's GEMM autotuning (`fp8`: Triton FP8 fusions or cuBLASLt)
#      and with Triton GEMMs off (`fp8_cublas`: cuBLASLt FP8 GEMMs, `--xla_gpu_enable_triton_gemm=false`);
#   6. where the step's time goes: the configs of 3 profiled (`benchmarks.profile`: per part, per kernel kind,
#      the GEMMs against the peak, the GPU's idle share), 3 timed and 3 traced steps each.
# Usage: benchmarks/accelerator_check.sh [--dry_run] [--out DIR] [--stages=NAME,...]
#   --stages: run only these stages, by name: parity, attention, attention_32k, bf16, demo, fp8, fp8_cublas,
#   profile
#   (default all; `--stages=bf16,profile` takes about 4 minutes on one H100).
#   --dry_run: the parity check with jax_nn at seq 256, the xla kernel at tiny sizes and the 1b stages with
#   tiny widths, on any backend (CPU CI). The 8b-slice stages are skipped there (at tiny widths they are the
#   same program as 1b), and so are the 32k attention and the demo run (the trainer's tests run it on CPU).
#   --out DIR: stages 2, 3 and 5 also write their results as JSON into DIR (attention_kernels.json,
#   attention_kernels_32k.json, 1b_bf16.json, ...), stage 4 its metrics.jsonl as demo_metrics.jsonl, stage 6
#   profile_1b.json and profile_8b-slice.json.
# Prints one line per stage; exits non-zero if any stage fails (the others still run).
set -u
cd "$(dirname "$0")/.."
DRY=""
OUTDIR=""
ALL_STAGES="parity,attention,attention_32k,bf16,demo,fp8,fp8_cublas,profile"
STAGES="$ALL_STAGES"
USAGE="usage: benchmarks/accelerator_check.sh [--dry_run] [--out DIR] [--stages=NAME,...]"
while [ $# -gt 0 ]; do
  case "$1" in
    --dry_run) DRY="--dry_run" ;;
    --out)
      if [ $# -lt 2 ]; then echo "--out needs a directory; $USAGE" >&2; exit 2; fi
      OUTDIR="$2"; shift ;;
    --stages=*) STAGES="${1#--stages=}" ;;
    *) echo "unknown argument $1; $USAGE" >&2; exit 2 ;;
  esac
  shift
done
for name in ${STAGES//,/ }; do
  case ",$ALL_STAGES," in
    *",$name,"*) ;;
    *) echo "unknown stage '$name' in --stages; choose from $ALL_STAGES" >&2; exit 2 ;;
  esac
done
if [ -z "${STAGES//,/}" ]; then echo "--stages names no stage; choose from $ALL_STAGES" >&2; exit 2; fi
chosen() {  # chosen NAME: whether --stages names the stage NAME
  case ",$STAGES," in *",$1,"*) return 0 ;; *) return 1 ;; esac
}
if [ -n "$OUTDIR" ]; then mkdir -p "$OUTDIR"; fi
json() {  # json NAME: the --json flag of a stage writing NAME.json into --out, nothing without --out
  if [ -n "$OUTDIR" ]; then echo "--json=$OUTDIR/$1.json"; fi
}
PY="${PYTHON:-python}"
status=0

stage() {  # stage SECONDS NAME COMMAND...
  local limit=$1 name=$2
  shift 2
  local start=$SECONDS
  echo "== $name"
  if timeout "$limit" "$@"; then
    echo "== $name: ok ($((SECONDS - start)) s)"
  else
    echo "== $name: FAILED (exit $?, $((SECONDS - start)) s)"
    status=1
  fi
}

echo "accelerator check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $($PY -c 'import jax; print(jax.devices()[0].device_kind)')"
if chosen parity; then
  stage 60 "attention parity (cudnn vs xla)" "$PY" -m benchmarks.attention_parity $DRY
fi
if chosen attention; then
  stage 100 "attention kernels with the document mask" "$PY" -m benchmarks.attention_kernels --max_document=4096 $DRY $(json attention_kernels)
fi
if [ -z "$DRY" ] && chosen attention_32k; then
  stage 100 "attention kernels at 32k tokens" "$PY" -m benchmarks.attention_kernels --seq=32768 --max_document=32768 \
    --kernels=cudnn_mask,cudnn_causal,cudnn_packed --calls=10 $(json attention_kernels_32k)
fi
CONFIGS="1b 8b-slice"
if [ -n "$DRY" ]; then CONFIGS="1b"; fi
for config in $CONFIGS; do
  if chosen bf16; then
    stage 80 "$config bf16" "$PY" -m benchmarks.accelerator --config=$config --steps 8 --warmup 2 $DRY $(json ${config}_bf16)
  fi
done
if [ -z "$DRY" ] && chosen demo; then
  demo=$(mktemp -d)
  # Without the exam questions: their package comes from PyPI, which an accelerator machine may not reach.
  stage 120 "the demo run" "$PY" -m experiments.pretrain --config=configs/runs/tiny_demo.py --workdir="$demo/run" \
    "--config.eval.tasks=()"
  if [ -n "$OUTDIR" ] && [ -f "$demo/run/metrics.jsonl" ]; then cp "$demo/run/metrics.jsonl" "$OUTDIR/demo_metrics.jsonl"; fi
fi
for config in $CONFIGS; do
  if chosen fp8; then
    stage 80 "$config fp8" "$PY" -m benchmarks.accelerator --config=$config --steps 8 --warmup 2 --fp8 $DRY $(json ${config}_fp8)
  fi
  if chosen fp8_cublas; then
    XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_triton_gemm=false" stage 80 "$config fp8 cublas" "$PY" -m benchmarks.accelerator \
      --config=$config --steps 8 --warmup 2 --fp8 $DRY $(json ${config}_fp8_cublas)
  fi
done
# The dry run profiles one timed and one traced step (the code path, not the figures).
PROFILE_STEPS="--warmup 3 --steps 3"
if [ -n "$DRY" ]; then PROFILE_STEPS="--warmup 1 --steps 1"; fi
for config in $CONFIGS; do
  if chosen profile; then
    stage 150 "$config profile" "$PY" -m benchmarks.profile --accelerator_config=$config $PROFILE_STEPS $DRY $(json profile_${config})
  fi
done
exit $status
