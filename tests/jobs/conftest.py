"""Fixtures of the job tests: a trainer workdir of a tiny model, and for the lm-eval tests a tiny exported HF
checkpoint with its tokenizer and a local German exams task (`train` and the XLA cache: tests/conftest.py)."""

import json
import os
import pathlib

import jax
import pytest

from apertus_jax.models import create_model, get_config

# The committed exams extract of the evaluation tests (tests/eval/assets/README.md).
EXAMS_EXTRACT = pathlib.Path(__file__).parents[1] / "eval" / "assets" / "german_exams_qa_first20.jsonl"


def write_tiny_workdir(
    workdir: str,
    step: int,
    init_std: float | None = None,
    tokenizer: str = "demo",
    vocab_size: int = 1024,
    posttrain_data: tuple[str, ...] = (),
) -> dict:
    """Writes a workdir as the trainer does (config.json + an Orbax checkpoint at `step`, the trainer's own
    assembly and checkpointer, and the provenance record its hook writes at start-up, nothing consumed) of a
    tiny model with the 1,024-id demo BPE (or `tokenizer` with `vocab_size` ids; `posttrain_data` makes it
    a post-training run's workdir); returns its parameters."""
    from apertus_jax.jobs.config import base_config, parse
    from apertus_jax.models.presets import model_section
    from apertus_jax.train.batches import Prefetcher
    from apertus_jax.train.checkpoint import Checkpointer, tree_shapes
    from apertus_jax.train.run import Run

    config = base_config()
    config.model = model_section(
        "tiny",
        vocab_size=vocab_size,
        d_model=32,
        n_heads=4,
        n_kv_heads=2,
        head_dim=8,
        mlp_hidden=64,
        max_seq_len=64,
    )
    if init_std is not None:
        config.model.init_std = init_std
    config.data.demo_tokenizer_vocab = 1024
    config.data.tokenizer = tokenizer
    config.posttrain.data = list(posttrain_data)
    config.data.seq_len = 64
    config.train.batch_plan = ((0, 8 * 64),)
    config.seed, config.mesh.data = 5, 1
    parsed = parse(config)
    with open(os.path.join(workdir, "config.json"), "w") as f:
        json.dump(parsed.to_dict(), f)
    run = Run(parsed.run, devices=jax.devices()[:1])
    state = run.spec.init()
    checkpointer = Checkpointer(os.path.join(workdir, "checkpoints"), keep=2, async_save=False)
    checkpointer.save(
        step,
        state,
        Prefetcher(run.batch_source(), 0),  # the data state as the loop saves it
        {"progress": {"step": step}, "param_shapes": tree_shapes(state["params"])},
    )
    checkpointer.close()
    record = {"step": step, "tokenizer": {"name": run.tokenizer.name, "checksum": run.tokenizer.checksum}}
    record.update(tokens_consumed={}, tokens_consumed_total=0, components={})
    with open(os.path.join(workdir, "provenance.json"), "w") as f:
        json.dump(record, f)
    return jax.device_get(state["params"])


@pytest.fixture(scope="session")
def hf_dir(tmp_path_factory):
    """A tiny Llama checkpoint exported by `save_hf`, with a 512-id byte-level BPE of the demo corpus."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    from apertus_jax.data import demo_corpus
    from apertus_jax.models.hf import save_hf

    directory = tmp_path_factory.mktemp("hf")
    texts = [d["text"] for d in demo_corpus.load_demo_documents("train")][:300]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    specials = ["<unk>", "<s>", "</s>", "<pad>"]
    bpe.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=512, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    # transformers' add_special_tokens=True (lm-eval's add_bos_token=True) then prepends <s>.
    bpe.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    config = get_config("tiny-llama", vocab_size=512, d_model=64, head_dim=16, mlp_hidden=128, init_std=0.1)
    save_hf(create_model(config, seed=3), directory)
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    ).save_pretrained(directory)
    assert json.loads((directory / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    return str(directory)


@pytest.fixture(scope="session")
def exams_task_dir(tmp_path_factory):
    """A local lm-eval task `german_exams_qa` over the committed first 20 questions."""
    from apertus_jax.eval.lm_eval_tasks import write_multiple_choice_task
    from apertus_jax.eval.tasks import parse_exams_qa_lines

    directory = tmp_path_factory.mktemp("tasks")
    questions = parse_exams_qa_lines(
        EXAMS_EXTRACT.read_text(encoding="utf-8").splitlines(), "german-exams-qa"
    )
    write_multiple_choice_task(str(directory), "german_exams_qa", questions)
    return str(directory)
