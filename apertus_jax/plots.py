"""Figures for PNG outputs, without pyplot: no global backend is set, so notebooks keep their own.

Every plot the package writes (loss curves, comparisons, heatmaps, fairness charts) is a
`matplotlib.figure.Figure` made by `figure` and written by `save` (atomically, `apertus_jax.files`).
"""

from __future__ import annotations

import os

import matplotlib
from matplotlib.colors import Colormap
from matplotlib.figure import Figure

from apertus_jax import files


def colormap(name: str) -> Colormap:
    """Matplotlib's registered colormap `name` (e.g. "tab20": 20 distinct colors in `.colors`)."""
    return matplotlib.colormaps[name]


def figure(figsize: tuple[float, float]) -> Figure:
    """A new figure of `figsize` inches (width, height); draw with `fig.subplots()`."""
    return Figure(figsize=figsize)


def save(fig: Figure, path: str | os.PathLike, dpi: int = 100) -> None:
    """Writes `fig` as a PNG to `path` (tight layout; atomic: a reader never sees a partial file)."""
    fig.tight_layout()
    with files.atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format="png")
