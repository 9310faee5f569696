"""Peak host memory of reading a sharded HF checkpoint onto 8 CPU devices (`models.hf.read_params`), against a
loader that reads every shard whole first (`models.hf.load_hf`).

    python tests/trained/hf_load_memory.py CHECKPOINT_DIR {read_params|load_hf}

Prints one JSON line: `peak_anon_bytes`, the largest rise of the process's anonymous resident memory (RssAnon,
sampled every millisecond by a thread; the safetensors files are memory-mapped, and their pages, which the
kernel can drop, are left out), and `loaded_bytes`, the bytes of the arrays loaded. Run by
tests/trained/test_export.py in a fresh process, so that nothing else of the suite is resident.
"""

import json
import os
import sys
import threading
import time

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax  # noqa: E402
from flax import nnx  # noqa: E402

from apertus_jax.models import hf  # noqa: E402
from apertus_jax.train.run import Run, run_config_for  # noqa: E402


def rss_anon() -> int:
    """This process's anonymous resident memory in bytes (/proc/self/status)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise OSError("no RssAnon in /proc/self/status")


def main(directory: str, loader: str) -> None:
    with open(os.path.join(directory, hf.CONFIG_FILE)) as f:
        model = hf.config_from_hf(json.load(f))
    run = Run(run_config_for(model, seq_len=64, rows=8, steps=1, optim={}, mesh={"data": 1, "fsdp": 8}))
    abstract = run.spec.abstract["params"]
    peak, done = [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_anon())
            time.sleep(0.001)

    base = rss_anon()
    sampler = threading.Thread(target=sample)
    sampler.start()
    if loader == "read_params":
        leaves = jax.tree.leaves(hf.read_params(directory, model, abstract))
    else:
        leaves = jax.tree.leaves(nnx.state(hf.load_hf(directory)))
    jax.block_until_ready(leaves)
    done.set()
    sampler.join()
    print(json.dumps({"peak_anon_bytes": peak[0] - base, "loaded_bytes": sum(x.nbytes for x in leaves)}))


if __name__ == "__main__":
    main(*sys.argv[1:])
