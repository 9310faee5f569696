"""Tests of the vendored demo corpus (`apertus_jax/data/demo_corpus.py`); its builder's are in
tests/prep/demo/test_corpus_build.py."""

import collections
import hashlib
import importlib.resources
import lzma
import re

import pytest

from apertus_jax.data import demo_corpus

MARKUP = re.compile(r"</?(div|p|span|a|code|em|strong|h[1-6])\b|&(amp|lt|gt|nbsp|quot);")
ASSETS = importlib.resources.files("apertus_jax.data").joinpath("assets")


def test_udhr_covers_at_least_400_languages():
    texts = demo_corpus.load_udhr()
    languages = demo_corpus.udhr_languages()
    assert len(texts) == len(languages) == demo_corpus.manifest()["assets"]["udhr.jsonl.xz"]["records"] == 521
    assert [lang["code"] for lang in languages] == sorted(texts)
    iso6393 = {lang["iso6393"] for lang in languages} - {"und"}
    assert len(iso6393) == demo_corpus.manifest()["assets"]["udhr.jsonl.xz"]["iso6393_languages"] >= 400
    assert {lang["direction"] for lang in languages} <= {"ltr", "rtl", "ttb"}


def test_udhr_english_and_german_article_1():
    texts = demo_corpus.load_udhr()
    assert "All human beings are born free and equal in dignity and rights." in texts["eng"]
    assert "Alle Menschen sind frei und gleich an Würde und Rechten geboren." in texts["deu_1996"]
    assert texts["eng"].startswith("Universal Declaration of Human Rights\n\nPreamble\n\nWhereas recognition")
    names = {lang["code"]: lang for lang in demo_corpus.udhr_languages()}
    assert names["eng"]["name"] == "English" and names["deu_1996"]["lang"] == "de-1996"
    assert names["azj_cyrl"]["script"] == "Cyrl" and names["eng"]["script"] is None


def test_udhr_texts_are_complete_translations():
    # 30 articles plus heading and preamble; the shortest complete translation has about 3 KB.
    for code, text in demo_corpus.load_udhr().items():
        assert len(text) > 2_000, code
        assert "\n\n" in text and "\n\n\n" not in text and text == text.strip(), code


@pytest.mark.slow
def test_no_empty_documents_and_clean_utf8():
    for name in demo_corpus.ASSET_FILES.values():
        raw = lzma.decompress(ASSETS.joinpath(name).read_bytes())
        raw.decode("utf-8", errors="strict")
    for doc in demo_corpus.load_demo_documents("train") + demo_corpus.load_demo_documents("heldout"):
        assert doc["text"].strip() and doc["text"] == doc["text"].strip(), doc["doc_id"]
        assert "\ufffd" not in doc["text"], doc["doc_id"]
        assert not MARKUP.search(doc["text"]), doc["doc_id"]
        assert set(doc) >= {"text", "lang", "source", "doc_id"}


def test_german_prose_is_german():
    docs = demo_corpus.load_german_prose()
    assert {d["package"] for d in docs} == {"fortunes-de", "debian-handbook", "debian-reference-de"}
    assert all(d["lang"] == "de" and d["source"] == "german_prose" for d in docs)
    text = "\n".join(d["text"] for d in docs)
    assert 3_000_000 < len(text.encode("utf-8")) < 10_000_000
    counts = collections.Counter(w.lower() for w in re.findall(r"\w+", text))
    top = {w for w, _ in counts.most_common(10)}
    assert {"der", "die", "und"} <= top
    assert counts["und"] > 10 * counts["the"]
    assert any("ß" in d["text"] or "ä" in d["text"] for d in docs[:50])


def test_prose_split_is_by_document_deterministic_and_5_percent():
    train = demo_corpus.load_demo_documents("train", ["german_prose"])
    heldout = demo_corpus.load_demo_documents("heldout", ["german_prose"])
    train_ids, heldout_ids = [d["doc_id"] for d in train], [d["doc_id"] for d in heldout]
    assert len(set(train_ids)) == len(train_ids) and not set(train_ids) & set(heldout_ids)
    assert (
        len(train_ids) + len(heldout_ids)
        == demo_corpus.manifest()["assets"]["german_prose.jsonl.xz"]["records"]
    )
    assert 0.04 < len(heldout_ids) / (len(train_ids) + len(heldout_ids)) < 0.06
    assert not demo_corpus.load_demo_documents("unseen_languages", ["german_prose"])
    assert [d["doc_id"] for d in demo_corpus.load_demo_documents("heldout", ["german_prose"])] == heldout_ids
    digest = hashlib.sha256(b"Alle Menschen sind frei").hexdigest()
    assert demo_corpus.is_heldout(" Alle\tMenschen\n\n sind frei ") == (int(digest[:8], 16) % 20 == 0)


def test_udhr_splits_unseen_translations_whole_and_paragraphs_of_the_others():
    """A translation held out whole is an unseen language; of every other, ~5% of its paragraphs are held out
    (text of a training language), and training keeps the rest in order."""
    udhr = demo_corpus.load_udhr()
    unseen = demo_corpus.load_demo_documents("unseen_languages", ["udhr"])
    train = demo_corpus.load_demo_documents("train", ["udhr"])
    heldout = demo_corpus.load_demo_documents("heldout", ["udhr"])
    unseen_codes, train_codes = {d["code"] for d in unseen}, [d["code"] for d in train]
    assert not unseen_codes & set(train_codes) and len(unseen_codes) + len(train_codes) == len(udhr)
    assert 0.02 < len(unseen_codes) / len(udhr) < 0.08 and all(d["text"] == udhr[d["code"]] for d in unseen)
    assert {d["code"] for d in heldout} <= set(train_codes) and len({d["code"] for d in heldout}) > 0.9 * len(
        train
    )
    held_paragraphs = sum(len(d["text"]) for d in heldout)
    assert 0.03 < held_paragraphs / sum(len(udhr[c]) for c in train_codes) < 0.08
    for document in train[::25]:
        paragraphs = udhr[document["code"]].split("\n\n")
        kept = [p for p in paragraphs if not demo_corpus.is_heldout(p)]
        assert document["text"] == "\n\n".join(kept) and len(kept) < len(paragraphs) + 1
        mine = [d["text"] for d in heldout if d["code"] == document["code"]]
        assert sorted(mine) == sorted(p for p in paragraphs if demo_corpus.is_heldout(p))
    # Any prefix of the held-out paragraphs mixes languages (the in-loop eval keeps a prefix).
    assert len({d["code"] for d in heldout[:50]}) > 40


@pytest.mark.slow
def test_no_heldout_text_also_occurs_in_training():
    """Over the whole corpus: no held-out or unseen-language document equals a training document or a paragraph
    of one after whitespace normalization, while the corpus really holds such duplicates (so the check is not
    vacuous)."""
    norm = demo_corpus.normalize_whitespace
    train = [norm(d["text"]) for d in demo_corpus.load_demo_documents("train")]
    paragraphs = {
        norm(p) for d in demo_corpus.load_demo_documents("train", ["udhr"]) for p in d["text"].split("\n\n")
    }
    heldout = [norm(d["text"]) for d in demo_corpus.load_demo_documents("heldout")]
    heldout += [norm(d["text"]) for d in demo_corpus.load_demo_documents("unseen_languages")]
    assert not set(train) & set(heldout) and not paragraphs & set(heldout)
    everything = train + heldout
    assert len(set(everything)) < len(everything)
    assert len(set(heldout)) < len(heldout)  # identical paragraphs of two translations: held out together


def test_sources_filter_and_bad_arguments():
    udhr = demo_corpus.load_demo_documents("train", sources=["udhr"])
    assert udhr and {d["source"] for d in udhr} == {"udhr"}
    with pytest.raises(ValueError, match="unknown split"):
        demo_corpus.load_demo_documents("test")
    with pytest.raises(ValueError, match="unknown demo corpus sources"):
        demo_corpus.load_demo_documents("train", sources=["wikipedia"])


@pytest.mark.slow
def test_returned_documents_do_not_alias_the_cache():
    demo_corpus.load_german_prose()[0]["text"] = "changed"
    demo_corpus.load_demo_documents("train")[0]["text"] = "changed"
    assert demo_corpus.load_german_prose()[0]["text"] != "changed"
    assert demo_corpus.load_demo_documents("train")[0]["text"] != "changed"


def test_assets_match_manifest_and_data_card():
    manifest = demo_corpus.manifest()
    card = ASSETS.joinpath("DATA_CARD.md").read_text(encoding="utf-8")
    assert set(manifest["assets"]) == set(demo_corpus.ASSET_FILES.values())
    for name, entry in manifest["assets"].items():
        data = ASSETS.joinpath(name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"] and len(data) == entry["bytes"]
        assert len(lzma.decompress(data).splitlines()) == entry["records"]
        assert f"`{name}` | `{entry['sha256']}`" in card
    for source in manifest["sources"]:
        assert source["archive_sha256"] in card and source["licence"] in card
        assert ASSETS.joinpath(source["copyright_file"]).read_text(encoding="utf-8").strip()
    assert "python -m experiments.build_demo_corpus --out apertus_jax/data/assets" in card


def test_changed_asset_is_rejected(monkeypatch):
    real = demo_corpus._read_asset
    monkeypatch.setattr(
        demo_corpus, "_read_asset", lambda name: real(name) + b"\0" if name.endswith(".xz") else real(name)
    )
    demo_corpus._records.cache_clear()
    try:
        with pytest.raises(ValueError, match="does not match the sha256"):
            demo_corpus.load_udhr()
    finally:
        monkeypatch.undo()
        demo_corpus._records.cache_clear()
