"""Export a training run as a HF checkpoint with its data statement (`experiments.export_hf`).

Writes `config.json` + `model.safetensors` (`apertus_jax.models.hf.save_hf`, loadable with transformers'
`ApertusForCausalLM`), the run's provenance record (`apertus_jax.jobs.records`) as `training_data.json` and a
model card `README.md` with the table of sources, licences and tokens.
"""

from __future__ import annotations

import json
import os

from apertus_jax import files
from apertus_jax.jobs.records import load_provenance, model_card
from apertus_jax.jobs.workdir import load_workdir
from apertus_jax.models.hf import save_hf

EXPORT_FILE = "training_data.json"
MODEL_CARD = "README.md"


def export_hf(workdir: str, directory: str) -> dict:
    """Exports the newest checkpoint of `workdir` as a HF checkpoint with its data statement into
    `directory`; returns the provenance record.

    Raises:
      FileNotFoundError: a missing workdir, no checkpoint or no provenance record.
      ValueError: the newest checkpoint and the provenance record are of different steps.
    """
    provenance = load_provenance(workdir)
    trained = load_workdir(workdir)
    if trained.step != provenance["step"]:
        raise ValueError(
            f"{workdir}: checkpoint step {trained.step} but provenance.json records step "
            f"{provenance['step']}; "
            "the run stopped between its checkpoint and its record, resume it to rewrite the record"
        )
    save_hf(trained.model, directory)
    files.write_text(
        os.path.join(directory, EXPORT_FILE), json.dumps(provenance, indent=1, sort_keys=True) + "\n"
    )
    files.write_text(os.path.join(directory, MODEL_CARD), model_card(provenance))
    return provenance
