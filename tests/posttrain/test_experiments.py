"""experiments.sft and experiments.qrpo as CLIs: bad input ends with one line naming the JSONL line, exit 2,
nothing written."""

import json

import pytest

CONFIG = """
from configs.posttrain import {base}


def get_config():
    config = {base}.get_config()
    config.unlock()
    config.posttrain.data = ("{path}",)
    config.checkpoint.init_from = "{init_from}"
    (_, tokens), = config.train.batch_plan
    config.train.batch_plan = ((0, 2 * tokens),)  # 8 rows: one per CPU device of the tests' process
    return config
"""


@pytest.mark.parametrize(
    "job, base, line",
    [
        ("sft", "sft_tiny", {"messages": [{"role": "robot", "content": "Hallo"}]}),
        ("qrpo", "qrpo_tiny", {"prompt": "", "completions": [], "reference_rewards": [1]}),
    ],
)
def test_bad_jsonl_line_is_one_line_and_nothing_is_written(job, base, line, tmp_path, run_job):
    data = tmp_path / "data.jsonl"
    good = {
        "messages": [{"role": "user", "content": "Hallo"}, {"role": "assistant", "content": "Guten Tag."}]
    }
    data.write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
    config = tmp_path / "config.py"
    config.write_text(CONFIG.format(base=base, path=data, init_from=tmp_path / "pretrained"))
    workdir = tmp_path / "workdir"
    result = run_job(f"experiments.{job}", f"--config={config}", f"--workdir={workdir}")
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and f"{data}:" in errors[0], result.stderr[-2000:]
    assert (f"{data}:2:" if job == "sft" else f"{data}:1:") in errors[0]
    assert not workdir.exists()
