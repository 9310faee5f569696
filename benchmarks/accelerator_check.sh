#!/usr/bin/env bash
# The accelerator check, one H100/H200 GPU, under 10 minutes (each stage has its own time limit):
#   1. packed-segment attention parity, cuDNN against the XLA reference (values, gradients, isolation);
#   2. one layer's attention with the document mask through each kernel, 8B heads, demo-corpus document lengths,
#      at 4,096 and (the cuDNN kernels) 32,768 tokens: time, temporaries, error;
#   3. train-step throughput of the 1b and 8b-slice configs in bf16 (tokens/s/device, MFU, memory, kernels);
#   4. the demo run (`experiments.pretrain`, configs/runs/tiny_demo.py): the whole loop on the accelerator;
#   5. the configs of 3 with FP8 projections.
# Usage: benchmarks/accelerator_check.sh [--dry_run] [--out DIR]
#   --dry_run: the parity check with jax_nn at seq 256, the xla kernel at tiny sizes and the 1b stages with
#   tiny widths, on any backend (CPU CI). The 8b-slice stages are skipped there (at tiny widths they are the
#   same program as 1b), and so are the 32k attention and the demo run (the trainer's tests run it on CPU).
#   --out DIR: stages 2, 3 and 5 also write their results as JSON into DIR (attention_kernels.json,
#   attention_kernels_32k.json, 1b_bf16.json, ...), stage 4 its metrics.jsonl as demo_metrics.jsonl.
# Prints one line per stage; exits non-zero if any stage fails (the others still run).
set -u
cd "$(dirname "$0")/.."
DRY=""
OUTDIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry_run) DRY="--dry_run" ;;
    --out) OUTDIR="$2"; shift ;;
    *) echo "unknown argument $1; usage: benchmarks/accelerator_check.sh [--dry_run] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
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
stage 60 "attention parity (cudnn vs xla)" "$PY" -m benchmarks.attention_parity $DRY
stage 100 "attention kernels with the document mask" "$PY" -m benchmarks.attention_kernels --max_document=4096 $DRY $(json attention_kernels)
if [ -z "$DRY" ]; then
  stage 100 "attention kernels at 32k tokens" "$PY" -m benchmarks.attention_kernels --seq=32768 --max_document=32768 \
    --kernels=cudnn_mask,cudnn_causal,cudnn_packed --calls=10 $(json attention_kernels_32k)
fi
CONFIGS="1b 8b-slice"
if [ -n "$DRY" ]; then CONFIGS="1b"; fi
for config in $CONFIGS; do
  stage 80 "$config bf16" "$PY" -m benchmarks.accelerator --config=$config --steps 8 --warmup 2 $DRY $(json ${config}_bf16)
done
if [ -z "$DRY" ]; then
  demo=$(mktemp -d)
  # Without the exam questions: their package comes from PyPI, which an accelerator machine may not reach.
  stage 120 "the demo run" "$PY" -m experiments.pretrain --config=configs/runs/tiny_demo.py --workdir="$demo/run" \
    "--config.eval.tasks=()"
  if [ -n "$OUTDIR" ] && [ -f "$demo/run/metrics.jsonl" ]; then cp "$demo/run/metrics.jsonl" "$OUTDIR/demo_metrics.jsonl"; fi
fi
for config in $CONFIGS; do
  stage 80 "$config fp8" "$PY" -m benchmarks.accelerator --config=$config --steps 8 --warmup 2 --fp8 $DRY $(json ${config}_fp8)
done
exit $status
