"""Tokenize raw documents into ArrayRecord shards with a manifest (the pipeline's production format), or into
a Megatron indexed dataset (`--format=megatron`: `OUT.bin`, `OUT.idx` and the manifest as `OUT.json`, which
the Megatron fork trains on as the prefix OUT, and the "megatron" component kind reads).

    python -m experiments.tokenize_data --input=DIR_OR_FILE [--input=...] --kind=jsonl --tokenizer=tekken \\
        --out=/data/shards/web --source=NAME --licence=ODC-By-1.0 [--score_field=score] [--shard_tokens=N] \\
        [--tasks=T --workers=W] [--executor=slurm --slurm_partition=normal --logging_dir=/scratch/logs] \\
        [--format=megatron [--megatron_dtype=int32]]

`--tokenizer=demo` is the 4,096-id demo BPE of the tiny runs (`data.tokenizer = "demo"`; trained on the demo
corpus on first use and cached under $APERTUS_JAX_CACHE, default ~/.cache/apertus_jax): the shards a tiny run
on your own text reads (`configs/runs/tiny_own_data.py`).

A front-end of `apertus_jax.prep.tokenize` (needs the `prep` extra, datatrove): T datatrove tasks (each a
share of the input files) on the local, Slurm or Ray executor, then one merged manifest. `--tasks=1` gives the
shards of a single process bit for bit; more tasks give the same documents and tokens in per-task parts.
`--out` appears atomically (a hidden staging directory renamed into place; a failed local run leaves nothing),
and the manifest records tokenizer name/sha256/vocab, source, licence, inputs, document and token counts,
skipped empty documents and replaced invalid UTF-8 bytes. Bad input ends with one line on stderr and exit
status 2.
"""

from absl import flags

from experiments import cli

cli.require_extras("prep")  # before the modules that import it: one line and exit 2 without it

from apertus_jax.data import sources  # noqa: E402
from apertus_jax.data.config import DataConfig  # noqa: E402
from apertus_jax.data.megatron import indexed as megatron  # noqa: E402
from apertus_jax.data.run_tokenizer import demo_tokenizer  # noqa: E402
from apertus_jax.data.shards import SHARD_TOKENS  # noqa: E402
from apertus_jax.logs import counted  # noqa: E402
from apertus_jax.prep.executors import EXECUTORS  # noqa: E402
from apertus_jax.prep.shard_parts import BATCH_DOCUMENTS  # noqa: E402
from apertus_jax.prep.tokenize import OUTPUT_FORMATS, run_tokenize, tokenize_job  # noqa: E402
from apertus_jax.tokenizers.load import DEMO, load_tokenizer, spec_forms  # noqa: E402
from apertus_jax.train.checkpoint import check_workdir_usable  # noqa: E402

_INPUT = flags.DEFINE_multi_string("input", None, "File or directory (repeatable).", required=True)
_KIND = flags.DEFINE_enum("kind", "jsonl", sources.RAW_KINDS, "Raw document format.")
_TOKENIZER = flags.DEFINE_string(
    "tokenizer",
    None,
    f"{spec_forms()} (demo: the tiny runs' demo BPE, trained on first use).",
    required=True,
)
_OUT = flags.DEFINE_string("out", None, "The shard set directory to create.", required=True)
_SOURCE = flags.DEFINE_string("source", None, "Name of the data source.", required=True)
_LICENCE = flags.DEFINE_string("licence", None, "Licence of the source text.", required=True)
_TEXT_FIELD = flags.DEFINE_string("text_field", "text", "Field of the document text.")
_ID_FIELD = flags.DEFINE_string("id_field", "id", "Field of the document id.")
_SCORE_FIELD = flags.DEFINE_string("score_field", None, "Field of a per-document score (kept in the shards).")
_SHARD_TOKENS = flags.DEFINE_integer("shard_tokens", SHARD_TOKENS, "Shard size in tokens.")
_BATCH_DOCUMENTS = flags.DEFINE_integer("batch_documents", BATCH_DOCUMENTS, "Documents per encode batch.")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace an existing --out.")
_FORMAT = flags.DEFINE_enum(
    "format", "arrayrecord", OUTPUT_FORMATS, "Output: a shard set, or a Megatron prefix."
)
_MEGATRON_DTYPE = flags.DEFINE_enum(
    "megatron_dtype",
    None,
    ["uint8", "int8", "int16", "uint16", "int32", "int64"],
    "Megatron token dtype (default as Megatron's preprocessing: uint16 below 65,500 ids, else int32).",
)
_TASKS = flags.DEFINE_integer("tasks", 1, "Datatrove tasks (input file shares).")
_WORKERS = flags.DEFINE_integer("workers", 1, "Tasks run at once.")
_EXECUTOR = flags.DEFINE_enum("executor", "local", EXECUTORS, "Datatrove executor.")
_LOGGING_DIR = flags.DEFINE_string("logging_dir", None, "Datatrove logs and stats (default: temporary).")
_SLURM_PARTITION = flags.DEFINE_string("slurm_partition", "normal", "Slurm partition.")
_SLURM_TIME = flags.DEFINE_string("slurm_time", "04:00:00", "Slurm time limit per task.")
_SLURM_CPUS_PER_TASK = flags.DEFINE_integer("slurm_cpus_per_task", 1, "Slurm CPUs per task.")
_SLURM_MEM_PER_CPU_GB = flags.DEFINE_integer("slurm_mem_per_cpu_gb", 4, "Slurm memory per CPU (GB).")
_SLURM_VENV = flags.DEFINE_string("slurm_venv", None, "Virtualenv activate script on the nodes.")


def main(argv) -> None:
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments {argv[1:]}")
    # before the tokenizer (the demo BPE trains on first use) and the tokenizing: the output is written at the end
    if _FORMAT.value == "megatron":
        cli.check_output_file(megatron.data_path(_OUT.value), "--out")
    else:
        check_workdir_usable(_OUT.value, "--out")
    tokenizer = _TOKENIZER.value
    # Loaded before the tokenizing's workers start, each of which loads it again: a bad spec or a file that is
    # no tokenizer is one line at once.
    if tokenizer == DEMO:  # the BPE a run with data.tokenizer="demo" uses: the shards read in such a run
        tokenizer = "sentencepiece:" + demo_tokenizer(DataConfig.demo_tokenizer_vocab).path
    else:
        load_tokenizer(tokenizer)
    job = tokenize_job(
        _INPUT.value,
        _OUT.value,
        tokenizer,
        _SOURCE.value,
        _LICENCE.value,
        executor=_EXECUTOR.value,
        workers=_WORKERS.value,
        slurm={
            "partition": _SLURM_PARTITION.value,
            "time": _SLURM_TIME.value,
            "cpus_per_task": _SLURM_CPUS_PER_TASK.value,
            "mem_per_cpu_gb": _SLURM_MEM_PER_CPU_GB.value,
            "venv_path": _SLURM_VENV.value,
        },
        logging_dir=_LOGGING_DIR.value,
        kind=_KIND.value,
        text_field=_TEXT_FIELD.value,
        id_field=_ID_FIELD.value,
        score_field=_SCORE_FIELD.value,
        shard_tokens=_SHARD_TOKENS.value,
        batch_documents=_BATCH_DOCUMENTS.value,
        overwrite=_OVERWRITE.value,
        tasks=_TASKS.value,
        output_format=_FORMAT.value,
        megatron_dtype=_MEGATRON_DTYPE.value,
    )
    manifest = run_tokenize(job)
    if manifest is None:
        print(f"submitted: the data appears at {_OUT.value} when the last job ends")
        return
    if _FORMAT.value == "megatron":
        print(
            f"wrote {_OUT.value}.bin/.idx ({manifest['megatron_dtype']}): {manifest['documents']:,} documents, "
            f"{manifest['tokens']:,} tokens from {counted(manifest['tasks'], 'task')}; "
            f"{manifest['replaced_invalid_utf8']} invalid UTF-8 bytes replaced, "
            f"{manifest['skipped_empty_documents']} empty documents skipped"
        )
        return
    print(
        f"wrote {_OUT.value}: {manifest['documents']:,} documents, {manifest['tokens']:,} tokens in "
        f"{counted(len(manifest['shards']), 'shard')} from {counted(manifest['tasks'], 'task')}; "
        f"{manifest['replaced_invalid_utf8']} invalid UTF-8 bytes replaced, "
        f"{manifest['skipped_empty_documents']} empty documents skipped"
    )


if __name__ == "__main__":
    cli.execute(main)
