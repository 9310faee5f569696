"""experiments.pretrain and pretrain_gpt_samples on a Megatron dataset (the "megatron" component kind): bad
prefixes stop with one line. Its resume after kill -9 and SIGTERM, as a process: tests/experiments/test_pretrain.py;
blends resume bitwise too: tests/data/megatron/test_indexed.py."""

import numpy as np
import pytest

from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.data.megatron.indexed import write_indexed_dataset
from apertus_jax.data.run_tokenizer import demo_tokenizer

CONFIG = '''from configs.runs import tiny_resume


def get_config():
    """tiny_resume with its data replaced by a Megatron dataset of the same documents (same component name)."""
    config = tiny_resume.get_config()
    with config.unlocked():
        config.data.pipeline.components = {{"demo": {{"kind": "megatron", "paths": "{prefix}"}}}}
    return config
'''


def write_megatron_run(tmp_path):
    """The UDHR training documents of tiny_resume's demo component, in its order and with its demo BPE ids
    (1,024 ids: uint16), as the Megatron dataset PREFIX = tmp_path/udhr; and the run's config file."""
    tokenizer = demo_tokenizer(1024)
    texts = [d["text"] for d in load_demo_documents("train", ["udhr"])]
    write_indexed_dataset(str(tmp_path / "udhr"), [tokenizer.encode_document(t) for t in texts], np.uint16)
    config = tmp_path / "megatron_resume.py"
    config.write_text(CONFIG.format(prefix=tmp_path / "udhr"))
    return str(config)


@pytest.mark.slow
def test_a_truncated_bin_stops_pretrain_with_one_line_before_anything_is_written(tmp_path, run_job):
    config_path = write_megatron_run(tmp_path)
    with open(tmp_path / "udhr.bin", "r+b") as f:
        f.truncate(5000)
    workdir = tmp_path / "run"
    result = run_job("experiments.pretrain", f"--config={config_path}", f"--workdir={workdir}")
    # The error alone: the prefix is opened before the run logs its start-up lines.
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith(
        f"error: data.pipeline.components.demo: {tmp_path / 'udhr.bin'}: 5000 bytes, but sequence 0 of "
    )
    assert lines[0].endswith("the .bin is truncated or the index points past its end")
    assert not workdir.exists()


@pytest.mark.slow
def test_gpt_samples_of_a_missing_or_truncated_prefix_stop_with_the_error_alone(tmp_path, run_job):
    """experiments.pretrain_gpt_samples on a prefix without files, then on a truncated .bin, then with a split
    that leaves the train part empty: the one error line alone on stderr, exit 2, no workdir."""
    write_megatron_run(tmp_path)
    workdir = tmp_path / "run"
    cases = [
        (str(tmp_path / "none"), "969,30,1", f"error: {tmp_path / 'none.idx'}: no such file"),
        (str(tmp_path / "udhr"), "0,1,0", "error: split='0,1,0' gives the train part no sequences"),
    ]
    for prefix, split, message in cases:
        result = run_job(
            "experiments.pretrain_gpt_samples",
            "--config=configs/runs/tiny_resume.py",
            f"--workdir={workdir}",
            f"--data_path={prefix}",
            f"--split={split}",
        )
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
        assert lines[0].startswith(message), lines
        assert not workdir.exists()
