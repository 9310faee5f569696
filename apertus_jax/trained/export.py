"""Export a training run as a HF checkpoint with its tokenizer and data statement (`experiments.export_hf`).

Writes, each file atomically with the permissions of a plain `open()` (0644 under the usual umask 022):

- `config.json` + `model.safetensors` (`apertus_jax.models.hf.save_hf`, loadable with transformers'
  `ApertusForCausalLM` / `LlamaForCausalLM`), with the run tokenizer's BoS/EoS/pad ids;
- `tokenizer.json`: the run's tokenizer as the `tokenizers` library serializes it
  (`apertus_jax.tokenizers.hf_export`: the demo SentencePiece BPE, tekken, or the `hf:` file), encoding and
  decoding like the run's tokenizer, BoD first when special tokens are added;
- `tokenizer_config.json`: the special tokens as the run uses them (`bos_token` = BoD, `eos_token` = EoD,
  `pad_token`); for a post-trained run (`posttrain.data` set) also the chat role tokens and the Jinja
  `chat_template` of the project's chat format (`apertus_jax.posttrain.chat.CHAT_TEMPLATE`);
- `generation_config.json`: BoS/EoS/pad ids; a post-trained run also stops at `<|assistant_end|>`;
- the run's provenance record (`apertus_jax.records.provenance`) as `training_data.json` and a model card
  `README.md` with the table of sources, licences and tokens.

The export is written into a hidden staging directory beside the output directory and renamed into place at
the end (`apertus_jax.files.staged_directory`): a failed export leaves nothing behind, and an existing
non-empty output directory is refused unless `overwrite`, which replaces an earlier export whole; a directory
holding anything an export does not write (a workdir, a folder above one, a user's files) is never replaced.
"""

from __future__ import annotations

import json
import os

from apertus_jax import files
from apertus_jax.models.hf import CONFIG_FILE, WEIGHTS_FILE, save_hf
from apertus_jax.posttrain import chat
from apertus_jax.records.provenance import load_provenance, model_card
from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.tokenizers.hf_export import hf_tokenizer, special_token_names
from apertus_jax.train.checkpoint import WorkdirLock
from apertus_jax.trained.workdir import load_workdir

EXPORT_FILE = "training_data.json"
MODEL_CARD = "README.md"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
GENERATION_CONFIG = "generation_config.json"
# What an export writes: all that `overwrite` may replace.
EXPORT_FILES = frozenset(
    {CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE, TOKENIZER_CONFIG, GENERATION_CONFIG, EXPORT_FILE, MODEL_CARD}
)


def check_out(directory: str, overwrite: bool) -> None:
    """Checks that an export may be written to `directory`: new, empty, or with `overwrite` an earlier export.

    Raises:
      FileExistsError: `directory` is a file, is not empty and not `overwrite`, or holds entries that no export
        writes (`overwrite` would delete them: a training workdir, a folder above one, a user's files).
    """
    files.check_replaceable(directory, overwrite=overwrite)
    foreign = sorted(set(os.listdir(directory)) - EXPORT_FILES) if os.path.isdir(directory) else []
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise FileExistsError(
            f"{directory} holds {shown}, which no export writes: --overwrite replaces an earlier export only; "
            "choose a new output directory"
        )


def tokenizer_files(
    tokenizer: Tokenizer, posttrained: bool
) -> tuple[dict[str, str], dict[str, int | list[int]]]:
    """The tokenizer files of an export and the special ids of its `config.json`.

    Args:
      tokenizer: the run's tokenizer.
      posttrained: add the chat role tokens, the chat template and `<|assistant_end|>` as a stop id.

    Returns:
      `({file name: text} of tokenizer.json, tokenizer_config.json, generation_config.json,
      {"bos_id", "eos_id", "pad_id"})`.

    Raises:
      ValueError: a tokenizer without a tokenizer.json conversion, or a post-trained run's tokenizer without
        role tokens (`hf_export.hf_tokenizer`, `chat.role_token_ids`).
    """
    roles = chat.role_token_names(tokenizer) if posttrained else {}
    hf = hf_tokenizer(tokenizer, roles)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special_token_names(tokenizer, hf),
        # transformers' default cleanup would drop the space before "." or "'s": decode must give the run's text.
        "clean_up_tokenization_spaces": False,
    }
    eos_ids: int | list[int] = tokenizer.eod_id
    if posttrained:
        config["additional_special_tokens"] = [roles[i] for i in sorted(roles)]
        config["chat_template"] = chat.CHAT_TEMPLATE
        eos_ids = [tokenizer.eod_id, chat.role_token_ids(tokenizer)["assistant"][1]]
    generation = {"bos_token_id": tokenizer.bod_id, "eos_token_id": eos_ids, "pad_token_id": tokenizer.pad_id}
    texts = {
        TOKENIZER_FILE: hf.to_str(),
        TOKENIZER_CONFIG: json.dumps(config, indent=2, ensure_ascii=False) + "\n",
        GENERATION_CONFIG: json.dumps(generation, indent=2) + "\n",
    }
    return texts, {"bos_id": tokenizer.bod_id, "eos_id": tokenizer.eod_id, "pad_id": tokenizer.pad_id}


def export_hf(workdir: str, directory: str, *, overwrite: bool = False) -> dict:
    """Exports the newest checkpoint of `workdir` as a HF checkpoint with its tokenizer and data statement
    into `directory` (module docstring); returns the provenance record.

    A workdir a live run holds is exported as its newest checkpoint stands, with a warning naming its step
    (`workdir.load_workdir`).

    Raises:
      FileExistsError: as `check_out` (checked first).
      FileNotFoundError, NotADirectoryError: not a training workdir (`workdir.read_config`), no checkpoint
        (a live run that has saved none yet is named as such) or no provenance record.
      ValueError: the newest checkpoint and the provenance record are of different steps (a live run between
        the two is named as such); as `tokenizer_files` and `models.hf.to_hf`.
    """
    check_out(directory, overwrite)
    trained = load_workdir(workdir, "exporting")
    provenance = load_provenance(workdir)
    if trained.step != provenance["step"] and WorkdirLock.held(workdir):
        raise ValueError(
            f"a run holds {workdir} and is between its checkpoint and its provenance record (step "
            f"{trained.step} against {provenance['step']}); rerun in a moment"
        )
    if trained.step != provenance["step"]:
        raise ValueError(
            f"{workdir}: the newest readable checkpoint is of step {trained.step} but provenance.json records "
            f"step {provenance['step']}: the run stopped between its checkpoint and its record, or its newest "
            "checkpoint is unreadable (a warning above says so); resume the run to write both again"
        )
    texts, special_ids = tokenizer_files(trained.tokenizer, posttrained=bool(trained.config.posttrain.data))
    texts[EXPORT_FILE] = json.dumps(provenance, indent=1, sort_keys=True) + "\n"
    texts[MODEL_CARD] = model_card(provenance)
    with files.staged_directory(directory, overwrite=overwrite) as staging:
        save_hf(trained.model, staging, **special_ids)
        for name, text in texts.items():
            files.write_text(os.path.join(staging, name), text)
    return provenance
