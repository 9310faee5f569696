"""The probe manifest of a run with injected components, written by a loop hook at start and after every
checkpoint.

`<workdir>/probes.json` (`probes.process<i>.json` on process i > 0: each process counts the occurrences its
own shards started) lists per injected component (probes, canaries; `apertus_jax.data.memorization.injection`) every
document's text, planned repetitions and the occurrences the batches handed to the train step so far started
(`apertus_jax.data.memorization.injection.manifest`). The memorization study reads it to score what was seen how often.
"""

from __future__ import annotations

import json
import os

import jax

from apertus_jax import files
from apertus_jax.data.memorization import injection
from apertus_jax.train.hooks import Hook, LoopContext


def manifest_path(workdir: str, process_index: int) -> str:
    """The manifest file of process `process_index` in `workdir`."""
    name = injection.MANIFEST if process_index == 0 else f"probes.process{process_index}.json"
    return os.path.join(workdir, name)


class ProbeManifest(Hook):
    """Writes this process's probe manifest when the loop starts and after every checkpoint (module
    docstring)."""

    def on_save(self, step: int, context: LoopContext) -> None:
        injected = context.run.config.data.pipeline.injected()
        if not injected:
            return
        exposures = context.batches.consumed().get("exposures", {})
        content = injection.manifest(injected, exposures, step)
        path = manifest_path(context.workdir, jax.process_index())
        files.write_text(path, json.dumps(content, indent=1, ensure_ascii=False))
