"""Raw document readers: JSONL, Parquet, plain text; invalid UTF-8 counted; empty documents skipped."""

import gzip
import json

import pytest

from apertus_jax.data.sources import RawStats, iter_raw_documents


def test_jsonl_fields_gzip_and_empty_documents(tmp_path):
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(b'{"text": "zweites", "id": "b1", "q": 2}\n'))
    (tmp_path / "a.jsonl").write_text('{"text": "erstes", "id": "a1", "q": 1.5}\n\n{"text": "  "}\n')
    stats = RawStats()
    documents = list(iter_raw_documents([tmp_path], "jsonl", stats, score_field="q"))
    assert [(d.text, d.doc_id, d.score) for d in documents] == [("erstes", "a1", 1.5), ("zweites", "b1", 2.0)]
    assert (stats.files, stats.documents, stats.skipped_empty) == (2, 2, 1)


def test_plain_text_files_with_invalid_bytes(tmp_path):
    (tmp_path / "doc.txt").write_bytes(b"Gr\xfc\xdfe\n")
    stats = RawStats()
    [document] = iter_raw_documents([tmp_path], "text", stats)
    assert document.text == "Gr\ufffd\ufffde\n" and stats.replaced_invalid_utf8 == 2


def test_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["eins", "zwei"], "id": ["x", "y"]}), tmp_path / "d.parquet")
    assert [d.text for d in iter_raw_documents([tmp_path], "parquet")] == ["eins", "zwei"]


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        list(iter_raw_documents([tmp_path / "missing"], "jsonl"))
    with pytest.raises(ValueError, match="no jsonl files"):
        list(iter_raw_documents([tmp_path], "jsonl"))
    (tmp_path / "x.jsonl").write_text(json.dumps({"body": "text"}) + "\n{broken\n")
    with pytest.raises(ValueError, match="no 'text' field"):
        list(iter_raw_documents([tmp_path], "jsonl"))
    with pytest.raises(ValueError, match="x.jsonl:2: not a JSON object"):
        list(iter_raw_documents([tmp_path], "jsonl", text_field="body"))
    with pytest.raises(ValueError, match="kind"):
        list(iter_raw_documents([tmp_path], "csv"))
