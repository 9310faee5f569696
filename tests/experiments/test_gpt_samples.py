"""experiments.gpt_samples: the summary and the first rows of a blend's GPT sample stream; a truncated .bin
is one line naming the file, exit 2, nothing written."""

import numpy as np

from apertus_jax.data.demo_corpus import load_german_prose
from apertus_jax.data.megatron import gpt_samples
from apertus_jax.data.megatron.indexed import write_indexed_dataset
from apertus_jax.tokenizers import load_tokenizer


def test_rows_and_summary_then_a_truncated_bin_is_one_line(tmp_path, run_job):
    tekken, prose = load_tokenizer("tekken"), load_german_prose()
    for name, (low, high) in {"a": (0, 300), "b": (300, 500)}.items():
        write_indexed_dataset(
            str(tmp_path / name), [tekken.encode_document(d["text"]) for d in prose[low:high]], "int32"
        )
    blend = f"0.6 {tmp_path / 'a'} 0.4 {tmp_path / 'b'}"
    flags = [
        f"--data_path={blend}",
        "--seq_len=32",
        "--seed=3",
        "--split=98,2",
        "--num_samples=500",
        "--rows=20",
    ]
    result = run_job("experiments.gpt_samples", *flags, f"--out={tmp_path / 'rows.npy'}")
    assert result.returncode == 0, result.stderr[-2000:]
    stream = gpt_samples.gpt_samples(blend, seq_len=32, seed=3, split="98,2", num_samples=500)
    np.testing.assert_array_equal(np.load(tmp_path / "rows.npy"), gpt_samples.first_rows(stream, 20))
    lines = result.stdout.splitlines()
    assert lines[-2:] == [
        "rows=500",
        f"wrote {tmp_path / 'rows.npy'}: 20 rows of 33 tokens",
    ]  # the blend: ceil(500 * 0.6) + ceil(500 * 0.4)
    assert lines[0].startswith(f"prefix={tmp_path / 'a'} dtype=int32 sequences=300 ")

    with open(tmp_path / "b.bin", "r+b") as f:
        f.truncate(1000)
    result = run_job("experiments.gpt_samples", *flags, f"--out={tmp_path / 'broken.npy'}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith(f"error: {tmp_path / 'b.bin'}: 1000 bytes, but sequence ")
    assert not (tmp_path / "broken.npy").exists()
