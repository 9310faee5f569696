#!/bin/bash
# Apertus pretraining on a Cloud TPU pod slice (v4 / v5e / v5p / v6e): the same command on every worker.
#
#   launch/tpu_pod.sh TPU_NAME ZONE configs/runs/apertus_8b.py gs://BUCKET/runs/apertus_8b [extra flags...]
#
# 1. copies this checkout to every worker (tar over `gcloud ... scp --worker=all`) and installs it with
#    jax[tpu] in ~/apertus_jax/.venv (SKIP_SETUP=1 skips both on a re-launch);
# 2. starts `python -m experiments.pretrain` on every worker under nohup (log: ~/apertus_jax/pretrain.log),
#    with APERTUS_DISTRIBUTED=1 so that jax.distributed.initialize() reads the worker list and this
#    worker's id from the TPU metadata server.
#
# WORKDIR must be a gs:// path (or a filesystem every worker mounts): all hosts write one Orbax checkpoint
# together, and re-running the same command resumes from its newest checkpoint. The persistent XLA
# compilation cache goes to WORKDIR/xla_cache. Preemption sends SIGTERM: a checkpoint at the current step,
# exit 0. To stop by hand: gcloud compute tpus tpu-vm ssh TPU_NAME --zone ZONE --worker=all \
#   --command "pkill -TERM -f experiments.pretrain"
# PROJECT (optional) selects the GCP project; otherwise gcloud's default.

set -euo pipefail

if [[ $# -lt 4 ]]; then
  echo "usage: $0 TPU_NAME ZONE CONFIG WORKDIR [extra flags...]" >&2
  exit 2
fi
TPU_NAME="$1"
ZONE="$2"
CONFIG="$3"
WORKDIR="$4"
shift 4
GCLOUD=(gcloud compute tpus tpu-vm)
TARGET=(--zone="$ZONE" --worker=all)
if [[ -n "${PROJECT:-}" ]]; then TARGET+=(--project="$PROJECT"); fi

if [[ "${SKIP_SETUP:-0}" != 1 ]]; then
  ARCHIVE="$(mktemp -d)/apertus_jax.tgz"
  tar czf "$ARCHIVE" --exclude=.venv --exclude=.git --exclude=workdir -C "$(dirname "$0")/.." .
  "${GCLOUD[@]}" scp "$ARCHIVE" "$TPU_NAME":apertus_jax.tgz "${TARGET[@]}"
  "${GCLOUD[@]}" ssh "$TPU_NAME" "${TARGET[@]}" --command "set -euo pipefail
    mkdir -p ~/apertus_jax && tar xzf ~/apertus_jax.tgz -C ~/apertus_jax && cd ~/apertus_jax
    [[ -d .venv ]] || python3 -m venv .venv
    .venv/bin/pip install -q -e . 'jax[tpu]==0.10.2'"
fi

"${GCLOUD[@]}" ssh "$TPU_NAME" "${TARGET[@]}" --command "set -euo pipefail
  cd ~/apertus_jax && source .venv/bin/activate
  export APERTUS_DISTRIBUTED=1 JAX_COMPILATION_CACHE_DIR=$WORKDIR/xla_cache
  nohup python -m experiments.pretrain --config=$CONFIG --workdir=$WORKDIR $* < /dev/null > pretrain.log 2>&1 &"
echo "started on every worker of $TPU_NAME; logs in ~/apertus_jax/pretrain.log on each worker"
