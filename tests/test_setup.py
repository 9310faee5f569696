"""setup.py: every data folder of the package (a folder without `__init__.py`) ships as a package of its own,
so installs carry its files without setuptools' warning about data in an unlisted folder."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).parents[1]


def test_every_data_folder_is_a_listed_package():
    tree = ast.parse((ROOT / "setup.py").read_text())
    assigned = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and node.targets[0].id == "DATA_PACKAGES"
    )
    listed = set(ast.literal_eval(assigned))
    folders = {
        ".".join(path.relative_to(ROOT).parts)
        for path in (ROOT / "apertus_jax").rglob("*")
        if path.is_dir() and path.name != "__pycache__" and not (path / "__init__.py").exists()
    }
    assert folders == listed and "apertus_jax.posttrain.assets" in listed
