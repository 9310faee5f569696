"""experiments.prepare_data as a CLI: without the prep extra, one line naming the install command, exit 2,
nothing written (the script imports the prep modules only after the check)."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).parents[2]


def test_without_the_prep_extra_names_the_install_command(tmp_path):
    """datatrove missing (simulated: a None entry in sys.modules makes its import fail): one line, exit 2."""
    shim = (
        "import runpy, sys; sys.modules['datatrove'] = None; "
        f"sys.argv = ['prepare_data', '--config=configs/prep/demo.py', '--config.work_dir={tmp_path}']; "
        "runpy.run_module('experiments.prepare_data', run_name='__main__')"
    )
    result = subprocess.run(
        [sys.executable, "-c", shim],
        cwd=ROOT,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: prepare_data needs the 'prep' extra")
    assert "datatrove is not installed" in result.stderr and 'pip install -e ".[prep]"' in result.stderr
    assert not list(tmp_path.iterdir())
