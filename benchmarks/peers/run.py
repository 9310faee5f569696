"""Installs and runs the throughput peers (MaxText, HF transformers) on bench-18m, each in its own venv.

Shapes (`BENCH_18M`, the same as our `bench-18m-*` presets): vocab 32,000, d_model 256, 2 layers, 4 heads
(4 kv, head_dim 64), batch 4 x 256 tokens, float32.
- MaxText 0.2.5, `decoder_block=llama2` (gated SiLU MLP 1,024), synthetic data, CPU; needs Python >= 3.12
  (found on PATH, through pyenv, or given as `--maxtext_python`). Its own log reports tokens/s per device
  for every step; the result is the median over the last `steps` of `warmup + steps` steps.
- transformers `ApertusForCausalLM` (ungated xIELU MLP 1,536) with torch AdamW: `transformers_step.py`.

Environments live under the cache directory (default `$PEERS_CACHE` or `/tmp/apertus-peers`); an environment
counts as installed only once its `.installed` marker is written, so an interrupted install is redone.
"""

import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
from collections.abc import Iterator

BENCH_18M = dict(vocab=32000, d_model=256, layers=2, heads=4, kv_heads=4, head_dim=64, batch=4, seq=256)
MAXTEXT_MLP = 1024  # gated (SwiGLU-style) hidden size of the Llama variant
APERTUS_MLP = 1536  # ungated xIELU hidden size: 1.5x, the same parameter count
MAXTEXT_PACKAGES = ("maxtext==0.2.5",)
# MaxText ships the requirements of its data-hub-free ("decoupled") mode inside the package.
MAXTEXT_EXTRA_REQUIREMENTS = "**/generated_requirements/decoupled-requirements.txt"
TRANSFORMERS_PACKAGES = ("torch==2.13.0", "transformers>=5.0")
PEERS = ("maxtext", "transformers")
_TOKENS_PER_S = re.compile(r"Tokens/s/device: ([0-9.]+)")


def default_cache() -> str:
    return os.environ.get("PEERS_CACHE", "/tmp/apertus-peers")


def python_version(python: str) -> tuple[int, int] | None:
    """(major, minor) of an interpreter, or None if it does not run."""
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True
        )
    except OSError:
        return None
    if out.returncode:
        return None
    major, minor = out.stdout.split()
    return int(major), int(minor)


def find_python(minimum: tuple[int, int]) -> str:
    """An interpreter of at least `minimum`: this one, `python3.X` on PATH, else a pyenv-installed one.

    Raises:
      RuntimeError: none found (the message says how to pass one).
    """
    candidates = [sys.executable] + [shutil.which(f"python3.{minor}") for minor in range(minimum[1], 16)]
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates += sorted(glob.glob(os.path.join(pyenv_root, "versions", "3.*", "bin", "python3")))
    for python in filter(None, candidates):
        version = python_version(python)
        if version and version >= minimum:
            return python
    raise RuntimeError(
        f"no Python >= {minimum[0]}.{minimum[1]} found (MaxText needs it); pass --maxtext_python=PATH"
    )


def ensure_venv(path: str, python: str, packages: tuple[str, ...], extra_requirements: str = "") -> str:
    """Creates (once) a venv at `path` with `packages` (then the requirements file matching the glob
    `extra_requirements` inside it, if given); returns its python. pip's output goes to `path`.log.

    Raises:
      RuntimeError: venv creation or an install failed (the log's tail is in the message).
    """
    venv_python = os.path.join(path, "bin", "python")
    marker = os.path.join(path, ".installed")
    if os.path.exists(marker):
        return venv_python
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    log_path = path + ".log"
    print(f"installing {' '.join(packages)} into {path} (log: {log_path})", file=sys.stderr, flush=True)
    with open(log_path, "w") as log:

        def call(cmd):
            if subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode:
                log.flush()
                with open(log_path) as f:
                    raise RuntimeError(f"{' '.join(cmd)} failed: {f.read()[-1500:]}")

        call([python, "-m", "venv", path])
        call([venv_python, "-m", "pip", "install", "-q", *packages])
        if extra_requirements:
            found = glob.glob(os.path.join(path, extra_requirements), recursive=True)
            if not found:
                raise RuntimeError(f"no {extra_requirements} inside {path}")
            call([venv_python, "-m", "pip", "install", "-q", "-r", found[0]])
    open(marker, "w").close()
    return venv_python


def maxtext_args(workdir: str, total_steps: int) -> list[str]:
    """MaxText `key=value` overrides for bench-18m (Llama-2 block, synthetic data, no checkpoints)."""
    s = BENCH_18M
    return [
        "run_name=bench",
        f"base_output_directory={workdir}",
        "dataset_type=synthetic",
        "hardware=cpu",
        "skip_jax_distributed_system=true",
        "enable_checkpointing=false",
        "model_name=default",
        "decoder_block=llama2",
        f"base_emb_dim={s['d_model']}",
        f"base_num_query_heads={s['heads']}",
        f"base_num_kv_heads={s['kv_heads']}",
        f"head_dim={s['head_dim']}",
        f"base_mlp_dim={MAXTEXT_MLP}",
        f"base_num_decoder_layers={s['layers']}",
        f"per_device_batch_size={s['batch']}",
        f"max_target_length={s['seq']}",
        f"steps={total_steps}",
        "dtype=float32",
    ]


def median_tokens_per_s(log: str, steps: int) -> tuple[float, int]:
    """(median, count) of the last `steps` per-step `Tokens/s/device: N` values of a MaxText log.

    Raises:
      RuntimeError: the log holds no such value.
    """
    values = [float(v) for v in _TOKENS_PER_S.findall(log)][-steps:]
    if not values:
        raise RuntimeError(f"no 'Tokens/s/device' in the MaxText log: {log[-1500:]}")
    return statistics.median(values), len(values)


def run_maxtext(cache: str, steps: int, warmup: int, python: str = "") -> str:
    """Installs (once) and runs MaxText; returns `maxtext tokens_per_s=N (median of K steps)`."""
    venv_python = ensure_venv(
        os.path.join(cache, "venv_maxtext"),
        python or find_python((3, 12)),
        MAXTEXT_PACKAGES,
        MAXTEXT_EXTRA_REQUIREMENTS,
    )
    workdir = os.path.join(cache, "maxtext_run")
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    # DECOUPLE_GCLOUD: MaxText's switch for running without Google Cloud services.
    env = dict(os.environ, DECOUPLE_GCLOUD="TRUE", JAX_PLATFORMS="cpu")
    cmd = [venv_python, "-m", "maxtext.trainers.pre_train.train", *maxtext_args(workdir, warmup + steps)]
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    with open(os.path.join(workdir, "log"), "w") as f:
        f.write(log)
    if proc.returncode:
        raise RuntimeError(f"MaxText failed (rc {proc.returncode}): {log[-1500:]}")
    median, count = median_tokens_per_s(log, steps)
    return f"maxtext tokens_per_s={median:.0f} (median of {count} steps)"


def transformers_usable(python: str) -> bool:
    """Whether `python` has torch and a transformers with `ApertusForCausalLM`."""
    check = "import torch; from transformers import ApertusForCausalLM"
    return subprocess.run([python, "-c", check], capture_output=True).returncode == 0


def run_transformers(cache: str, steps: int, warmup: int, vocab: int = BENCH_18M["vocab"]) -> str:
    """Runs `transformers_step.py` with this interpreter if it has torch + transformers (the `hf` extra),
    else in a cached venv; returns its `transformers tokens_per_s=N (median of K steps)` line. `vocab`
    replaces bench-18m's vocabulary (the body is unchanged).

    Raises:
      RuntimeError: the install or the run failed, or it printed no throughput.
    """
    python = sys.executable
    if not transformers_usable(python):
        python = ensure_venv(os.path.join(cache, "venv_transformers"), sys.executable, TRANSFORMERS_PACKAGES)
    s = BENCH_18M
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transformers_step.py")
    shape = dict(
        vocab=vocab,
        d_model=s["d_model"],
        layers=s["layers"],
        heads=s["heads"],
        kv_heads=s["kv_heads"],
        mlp=APERTUS_MLP,
        batch=s["batch"],
        seq=s["seq"],
    )
    cmd = [
        python,
        script,
        *(f"--{k}={v}" for k, v in shape.items()),
        f"--steps={steps}",
        f"--warmup={warmup}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode or "tokens_per_s=" not in line:
        raise RuntimeError(f"transformers peer failed (rc {proc.returncode}): {proc.stderr[-1500:]}")
    return line


def run_peers(
    peer: str,
    cache: str,
    steps: int = 15,
    maxtext_warmup: int = 5,
    transformers_warmup: int = 2,
    vocab: int = BENCH_18M["vocab"],
    maxtext_python: str = "",
) -> Iterator[str]:
    """The lines of `python -m benchmarks.peers PEER`: `peer` ("maxtext", "transformers" or "all") run one after
    another, one `PEER tokens_per_s=N (median of K steps)` line each as it finishes.

    Raises:
      ValueError (at the first line, before anything is installed): an unknown `peer`, `steps` or a warmup
        < 1, `vocab` < 1, or a `vocab` other than bench-18m's for a peer other than transformers.
      RuntimeError: as `run_maxtext` and `run_transformers`.
    """
    if peer not in (*PEERS, "all"):
        raise ValueError(f"unknown peer {peer!r}; choose one of {', '.join((*PEERS, 'all'))}")
    if steps < 1 or maxtext_warmup < 1 or transformers_warmup < 1:
        raise ValueError("--steps, --maxtext_warmup and --transformers_warmup must be >= 1")
    if vocab < 1:
        raise ValueError(f"--vocab={vocab} must be >= 1")
    if vocab != BENCH_18M["vocab"] and peer != "transformers":
        raise ValueError(f"--vocab is for the transformers peer only, not {peer!r}")
    for name in PEERS if peer == "all" else (peer,):
        if name == "maxtext":
            yield run_maxtext(cache, steps, maxtext_warmup, maxtext_python)
        else:
            yield run_transformers(cache, steps, transformers_warmup, vocab)
