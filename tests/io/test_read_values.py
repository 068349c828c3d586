"""Issue 12 item 3 and 17 (reader part): a malformed value is a reject whatever else is in the file, BOMs,
CSV line numbers, truncated files counted honestly."""
import bz2
import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gristmill import Dataset

from gm_testutil import check_accounting, read_jsonl

BAD_TEXTS = [(b"12345", "number"), (b'{"a": "b"}', "object"), (b"true", "boolean"), (b'["x"]', "array"),
             (b"1.5", "number")]


def _lines(bad: bytes, at: int, n: int = 40) -> bytes:
    rows = [b'{"text": "doc %d", "k": %d}' % (i, i) for i in range(n)]
    rows[at] = b'{"text": ' + bad + b', "k": %d}' % at
    return b"\n".join(rows) + b"\n"


@pytest.mark.parametrize("bad,kind", BAD_TEXTS)
@pytest.mark.parametrize("at", [0, 17, 39])
@pytest.mark.parametrize("shard_bytes", [1 << 20, 200])
def test_non_string_text_is_a_reject_wherever_it_is(tmp_path, read, bad, kind, at, shard_bytes):
    """Before: the value became text ("12345", '{"a": "b"}') when the chunk also held string texts."""
    p = tmp_path / "d.jsonl"
    p.write_bytes(_lines(bad, at))
    rows, rejects = read(p, shard_bytes=shard_bytes)
    assert [r["k"] for r in rows] == [i for i in range(40) if i != at]
    assert [(r.error_type, r.line, r.source) for r in rejects] == [("WrongFieldType", at + 1, str(p))]
    assert rejects[0].message == f"text field 'text' is a JSON {kind}, expected a string (line {at + 1})"
    assert rejects[0].row == {"text": json.loads(bad), "k": at}


@pytest.mark.parametrize("np_", [1, 2])
def test_non_string_text_rejected_in_a_run_at_any_np(tmp_path, np_):
    p = tmp_path / "d.jsonl"
    rows = [{"text": f"doc {i}", "k": i} for i in range(30)]
    rows[5]["text"], rows[20]["text"] = 12345, {"a": "b"}
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out, work = tmp_path / "o.jsonl", tmp_path / "w"
    rep = Dataset.load(str(p)).export(str(out), np=np_, work_dir=str(work), shard_bytes=300)
    check_accounting(rep)
    assert [r["k"] for r in read_jsonl(out)] == [i for i in range(30) if i not in (5, 20)]
    rej = read_jsonl(work / "rejects.jsonl")
    assert sorted((r["line"], r["error_type"]) for r in rej) == [(6, "WrongFieldType"), (21, "WrongFieldType")]


def test_lone_surrogate_is_a_reject_or_replaced_on_request(tmp_path, read):
    """Before: JSON's "\\ud800" became U+0000 (Polars) with no reject."""
    p = tmp_path / "s.jsonl"
    p.write_bytes(b'{"text": "ok"}\n{"text": "bad \\ud800 x"}\n{"text": "pair \\ud83d\\ude00"}\n'
                  b'{"text": "fine", "m": {"k": "\\udc00"}}\n')
    rows, rejects = read(p)
    assert [r["text"] for r in rows] == ["ok", "pair \U0001F600"]
    assert [(r.error_type, r.line) for r in rejects] == [("LoneSurrogate", 2), ("LoneSurrogate", 4)]
    rows, rejects = read(p, params=(("lone_surrogates", "replace"),))
    assert [r["text"] for r in rows] == ["ok", "bad \ufffd x", "pair \U0001F600", "fine"]
    assert rows[3]["m"] == {"k": "\ufffd"} and not rejects


@pytest.mark.parametrize("bad,kind", BAD_TEXTS)
def test_json_array_non_string_text_is_a_reject(tmp_path, read, bad, kind):
    items = [b'{"text": "a%d"}' % i for i in range(6)]
    items[2] = b'{"text": ' + bad + b"}"
    p = tmp_path / "a.json"
    p.write_bytes(b"[" + b",\n".join(items) + b"]")
    for batch_size in (1, 1000):
        rows, rejects = read(p, batch_size=batch_size)
        assert [r["text"] for r in rows] == ["a0", "a1", "a3", "a4", "a5"]
        assert [(r.error_type, r.offset, r.message) for r in rejects] == [
            ("WrongFieldType", 2, f"text field 'text' is a JSON {kind}, expected a string (item 2)")]


def test_json_array_keeps_big_ints_and_rejects_lone_surrogates(tmp_path, read):
    """ijson's C parser fails on integers beyond 64 bits and turns lone surrogates into '?'."""
    p = tmp_path / "a.json"
    p.write_bytes(b'[{"text": "a", "n": 1}, {"text": "b", "n": 18446744073709551616},'
                  b' {"text": "c \\ud800"}, {"text": "d \\ud83d\\ude00", "n": 2.5}]')
    rows, rejects = read(p)
    assert rows == [{"text": "a", "n": 1, "id": "a.json:0"}, {"text": "b", "n": 18446744073709551616, "id": "a.json:1"},
                    {"text": "d \U0001F600", "n": 2.5, "id": "a.json:3"}]
    assert [(r.error_type, r.offset) for r in rejects] == [("LoneSurrogate", 2)]


def test_parquet_non_string_text_column_rejects_each_row_with_its_number(tmp_path, read):
    pq.write_table(pa.table({"text": [1, 2, 3]}), tmp_path / "n.parquet")
    rows, rejects = read(tmp_path / "n.parquet")
    assert rows == []
    assert [(r.error_type, r.offset, r.row) for r in rejects] == [("WrongFieldType", i, {"text": i + 1}) for i in range(3)]
    assert rejects[1].message == "text field 'text' is int64, expected a string (row 1)"


def test_csv_text_column_of_numbers_is_text(tmp_path, read):
    """Before: pyarrow inferred int64 for a text column of digits and every row was rejected."""
    p = tmp_path / "n.csv"
    p.write_text("text,k\n123,1\n456,2\n")
    rows, rejects = read(p)
    assert [(r["text"], r["k"]) for r in rows] == [("123", 1), ("456", 2)] and not rejects


# -- item 17: BOM, CSV line numbers, truncated files --------------------------------------------------

BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("name,data,params", [
    ("b.jsonl", BOM + b'{"text": "first"}\n{"text": "second"}\n', ()),
    ("b.jsonl.gz", gzip.compress(BOM + b'{"text": "first"}\n{"text": "second"}\n', mtime=0), ()),
    ("b.json", BOM + b'[{"text": "first"}, {"text": "second"}]', ()),
    ("b.csv", BOM + b"text\nfirst\nsecond\n", ()),
    ("b.txt", BOM + b"first\nsecond\n", (("txt_mode", "line"),)),
])
def test_utf8_bom_is_not_part_of_the_first_row(tmp_path, read, name, data, params):
    """Before: the JSONL first row was rejected (JSONDecodeError: BOM not supported)."""
    p = tmp_path / name
    p.write_bytes(data)
    rows, rejects = read(p, params=params)
    assert [r["text"] for r in rows] == ["first", "second"] and not rejects


def test_bom_in_text_file_mode(tmp_path, read):
    (tmp_path / "d.txt").write_bytes(BOM + b"a document")
    rows, _ = read(tmp_path / "d.txt")
    assert rows[0]["text"] == "a document"


def test_ragged_csv_rejects_name_their_line(tmp_path, read):
    p = tmp_path / "r.csv"
    p.write_text('text,k\n"multi\nline",1\nbad,2,3\nok,4\nbad,2,3\n"x",5\nalso,bad,row,6\n')
    rows, rejects = read(p)
    assert [r["text"] for r in rows] == ["multi\nline", "ok", "x"]
    assert [(r.error_type, r.line) for r in rejects] == [("CsvRowError", 4), ("CsvRowError", 6), ("CsvRowError", 8)]
    assert rejects[0].message == "line 4: expected 2 fields, got 3: 'bad,2,3'"


@pytest.mark.parametrize("ext,compress", [(".gz", gzip.compress), (".bz2", bz2.compress)])
def test_truncated_file_is_a_file_error_not_a_row(tmp_path, ext, compress):
    """Before: the truncation reject counted as one more row in (rows_in = rows read + 1)."""
    rows = [{"text": f"row {i} " + " ".join(str(i * j % 997) for j in range(40))} for i in range(20000)]
    blob = compress(("".join(json.dumps(r) + "\n" for r in rows)).encode())
    p = tmp_path / f"cut.jsonl{ext}"
    p.write_bytes(blob[: len(blob) * 2 // 3])
    out, work = tmp_path / "o.jsonl", tmp_path / "w"
    rep = Dataset.load(str(p)).export(str(out), work_dir=str(work))
    check_accounting(rep)
    got = read_jsonl(out)
    assert 0 < len(got) < 20000
    read_row = next(o for o in rep["ops"] if o["op"] == "read")
    rej = read_jsonl(work / "rejects.jsonl")
    # the line the cut went through is a real (partial) row: a reject; the truncation itself is not a row
    partial = [r for r in rej if not r.get("file_error")]
    assert [(r["error_type"], r["line"]) for r in partial] == [("JSONDecodeError", len(got) + 1)]
    assert read_row["rows_in"] == len(got) + 1 and read_row["rejected"] == 1 and read_row["file_errors"] == 1
    assert [(r["error_type"], r["source"], r["line"]) for r in rej if r.get("file_error")] == \
        [("TruncatedInput", str(p), None)]
