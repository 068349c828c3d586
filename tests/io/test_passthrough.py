"""Issue 12 item 5 and 13 (reader part): fields no op touches come out value-for-value; bytes export;
a folder of HTML files is a dataset."""
import gzip
import json

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gristmill import Dataset, create_op

from gm_testutil import read_jsonl

# shaped like Common Crawl / Dolma rows: `attributes` keys differ per row and hold spans mixing ints and
# floats; `metadata` is the same six keys everywhere
CC = [{"id": f"doc{i}", "text": f"page {i} text", "source": "cc", "added": "2024-06-02T04:08:58.883Z",
       "metadata": {"warc_url": f"http://x{i}.org/", "url": f"x{i}.org/", "warc_date": "2019-07-17T12:15:59Z",
                    "warc_filename": "<urn:uuid:1>", "content_type": "text/html", "uncompressed_offset": 813814 + i},
       "attributes": ({"cc_re__cc_by_sa_3_0": [[39944, 40015, 1.0]]} if i % 3 == 0 else
                      {"cc_re__cc_by_4_0": [[12, 80, 1.0]], "cc_re__cc_by_nc": [[1, 2, 0.5], [3, 4, 1.0]]}
                      if i % 3 == 1 else {})}
      for i in range(12)]

HETERO = [
    {"text": "a", "meta": {"lang": "en", "score": 1}, "n": 1, "big": 2 ** 70, "l": [1, 2.5, "x"], "z": None},
    {"text": "b", "meta": {"lang": "de"}, "n": 2.5, "big": -2 ** 64, "l": [], "extra": {"deep": [{"a": None}]}},
    {"text": "c", "n": 3, "big": 5, "l": None, "z": None, "u": "\u2028é😀", "e": {}},
    {"text": "d", "meta": {"lang": "fr", "score": 0.5, "k": [1]}, "n": True, "z": 1, "big": 2 ** 63},
    {"text": "e", "n": "five", "f": 1.0, "g": [[1, 2], [3.5]], "h": [{"a": 1}, {"b": 2}]},
]


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows),
                    encoding="utf-8")
    return str(path)


def _without_made_ids(got, want):
    return [{k: v for k, v in g.items() if k != "id" or "id" in w} for g, w in zip(got, want)]


@pytest.mark.parametrize("rows", [CC, HETERO], ids=["cc", "hetero"])
@pytest.mark.parametrize("batch_size,multi_stage", [(1000, False), (2, True)])
def test_jsonl_fields_round_trip_value_for_value(tmp_path, rows, batch_size, multi_stage):
    """Before: `attributes` came back with every key of every row (nulls), ints as floats, the file 1.9x
    larger; mixed-type fields were rejected or stringified depending on the chunk."""
    src = _write(tmp_path / "in.jsonl", rows)
    ds = Dataset.load(src)
    if multi_stage:  # a stage boundary: batches with different shapes meet in one Arrow shard file
        ds = ds.process([create_op("document_deduplicator", {})])
    out = tmp_path / "out.jsonl"
    ds.export(str(out), batch_size=batch_size, work_dir=str(tmp_path / "w"))
    got = read_jsonl(out)
    assert _without_made_ids(got, rows) == rows
    if rows is CC:
        assert out.read_bytes() == (tmp_path / "in.jsonl").read_bytes()  # compact input: the same bytes
        assert pl.read_ndjson(out).height == len(CC)  # before: Polars refused our own output


def test_round_trip_through_parquet_keeps_json_text(tmp_path):
    src = _write(tmp_path / "in.jsonl", HETERO)
    Dataset.load(src).export(str(tmp_path / "o.parquet"))
    t = pq.read_table(tmp_path / "o.parquet")
    assert t.schema.field("meta").metadata == {b"gristmill.json": b"raw"}
    assert json.loads(t.column("meta")[0].as_py()) == {"lang": "en", "score": 1}
    Dataset.load(str(tmp_path / "o.parquet")).export(str(tmp_path / "back.jsonl"))
    assert _without_made_ids(read_jsonl(tmp_path / "back.jsonl"), HETERO) == HETERO


def test_field_ops_read_raw_json_fields(tmp_path):
    src = _write(tmp_path / "in.jsonl", HETERO)

    def texts(op, params):
        return [r["text"] for r in Dataset.load(src).process([create_op(op, params)]).to_list()]
    assert texts("specified_field_filter", {"field_key": "meta.lang", "target_value": ["en", "fr"]}) == ["a", "d"]
    assert texts("specified_numeric_field_filter", {"field_key": "n", "min_value": 2, "max_value": 3}) == ["b", "c"]
    assert texts("specified_numeric_field_filter", {"field_key": "meta.score", "min_value": 0.6}) == ["a"]
    assert Dataset.load(src).to_list()[3]["big"] == 2 ** 63


def test_binary_column_exports_as_base64(tmp_path):
    """Before: a Parquet binary column passed through made the JSONL export panic in Polars."""
    pq.write_table(pa.table({"text": ["a", "b"], "blob": pa.array([b"\x00\xffhi", None], pa.binary()),
                             "nested": pa.array([{"b": b"\x01"}, {"b": None}],
                                                pa.struct([("b", pa.large_binary())]))}), tmp_path / "b.parquet")
    Dataset.load(str(tmp_path / "b.parquet")).export(str(tmp_path / "o.jsonl"))
    got = read_jsonl(tmp_path / "o.jsonl")
    assert [(g["blob"], g["nested"]) for g in got] == [("AP9oaQ==", {"b": "AQ=="}), (None, {"b": None})]


def test_folder_of_html_files_is_a_dataset(tmp_path):
    site = tmp_path / "site"
    (site / "sub").mkdir(parents=True)
    (site / "a.html").write_bytes(b'<html><head><meta charset="windows-1252"><title>caf\xe9</title></head>'
                                  b'<body><p>Caf\xe9 cr\xe8me \x80</p></body></html>')
    (site / "sub" / "b.html.gz").write_bytes(gzip.compress(b"\xef\xbb\xbf<html><body><p>\xc3\xa9t\xc3\xa9</p></body></html>"))
    (site / "d.htm.gz").write_bytes(gzip.compress(b"<p>cut</p>" * 1000)[:40])  # truncated: a reject
    ds = Dataset.load(str(site))
    rows = ds.to_list()
    assert [(r["id"], r["charset"]) for r in rows] == [("a.html", "cp1252"), ("sub/b.html.gz", "utf-8")]
    assert rows[0]["text"].endswith("<p>Café crème €</p></body></html>")
    assert rows[1]["text"] == "<html><body><p>été</p></body></html>"  # BOM dropped
    read_row = next(o for o in ds.last_report["ops"] if o["op"] == "read")
    assert (read_row["rows_in"], read_row["rejected"]) == (3, 1)
    out = Dataset.load(str(site)).process([create_op("html_extract_mapper", {"extractor": "resiliparse"})])
    texts = {r["id"]: r["text"] for r in out.to_list()}
    assert "Café crème €" in texts["a.html"] and texts["sub/b.html.gz"] == "été"
