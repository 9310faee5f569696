"""Every notebook in notebooks/ runs headless on CPU without an error, and none is committed with outputs."""

import os
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

from .conftest import COMPILE_FLAGS

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_the_notebooks_are_there():
    assert {p.stem for p in NOTEBOOKS} >= {
        "schedules",
        "ablation_comparison",
        "tokenizer_fairness",
        "goldfish_memorization",
        "boldt_strategies",
    }


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_runs_headless(path, tmp_path, monkeypatch):
    # The kernel imports this checkout (not another install), sees one CPU device (the tests' 8 virtual
    # devices are for mesh tests), compiles as the tests do (tests/conftest.py) and writes only into tmp_path,
    # its temporary folders (`tempfile.mkdtemp` of the study notebooks) included: none is left in /tmp.
    kernel_tmp = tmp_path / "tmp"
    kernel_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(kernel_tmp))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("XLA_FLAGS", COMPILE_FLAGS)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError naming the cell on any error
    assert not list(ROOT.joinpath("notebooks").glob("*.png"))
    if "tempfile." in path.read_text(encoding="utf-8"):
        assert list(kernel_tmp.iterdir()), "the notebook's temporary folder is not under tmp_path"
