"""Readers: every format, and every kind of corrupt input goes to rejects while the rest is read."""
import bz2
import gzip
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from gristmill import Dataset
from gristmill.core import columns as C
from gristmill.io.base import ReadOptions, read_shard, read_texts
from gristmill.io.planner import plan_dataset
from gristmill.core.accounting import Reject

from gm_testutil import write_jsonl


def read_all(path, **kw):
    opts = ReadOptions(root=os.path.dirname(str(path)), **kw)
    rows, rejects = [], []
    for s in plan_dataset(str(path), opts):
        for item in read_shard(s, opts):
            (rejects.append(item) if isinstance(item, Reject) else rows.extend(C.to_pylist(item)))
    return rows, rejects


GOOD = [{"text": f"document number {i}", "n": i} for i in range(50)]


def corrupt_lines():
    lines = [json.dumps(r).encode() for r in GOOD]
    lines[3] = b'{"text": "unterminated'            # bad JSON
    lines[7] = b'{"text": "caf\xff bad utf8", "n": 7}'  # invalid UTF-8
    lines[11] = b'{"text": 12345, "n": 11}'          # wrong type for the text field
    lines[13] = b'{"n": 13}'                         # missing text
    lines[17] = b'[1, 2, 3]'                         # not an object
    lines[19] = b'{"text": "x", "n": "nineteen"}'    # another type for another field: kept as is
    return lines


def test_jsonl_corrupt_lines_go_to_rejects(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b"\n".join(corrupt_lines()) + b"\n")
    rows, rejects = read_all(p)
    bad = {3, 7, 11, 13, 17}
    assert [r["n"] for r in rows] == [i if i != 19 else "nineteen" for i in range(50) if i not in bad]
    assert sorted(r.line for r in rejects) == sorted(i + 1 for i in bad)
    kinds = {r.line: r.error_type for r in rejects}
    assert kinds[4] == "JSONDecodeError" and kinds[8] == "UnicodeDecodeError"
    assert kinds[12] == "WrongFieldType" and kinds[14] == "MissingField" and kinds[18] == "WrongFieldType"
    assert all(r.source == str(p) and r.offset is not None for r in rejects)
    # ids are stable: file + byte offset of the line
    assert rows[0]["id"] == "bad.jsonl:0"


@pytest.mark.parametrize("ext,compress", [(".gz", gzip.compress), (".zst", zstandard.ZstdCompressor().compress),
                                          (".bz2", bz2.compress)])
def test_truncated_compressed_file_keeps_what_was_read(tmp_path, ext, compress):
    # varied text over several bz2 blocks (a cut inside bz2's only block would leave nothing readable)
    rows = [{"text": f"row {i} " + " ".join(str(i * j % 997) for j in range(40))} for i in range(20000)]
    blob = compress(("\n".join(json.dumps(r) for r in rows) + "\n").encode())
    full = tmp_path / f"full.jsonl{ext}"
    full.write_bytes(blob)
    got, rej = read_all(full)
    assert len(got) == 20000 and not rej
    cut = tmp_path / f"cut.jsonl{ext}"
    cut.write_bytes(blob[: len(blob) * 2 // 3])
    got, rej = read_all(cut)
    assert 0 < len(got) < 20000
    assert [r["text"] for r in got] == [r["text"] for r in rows[: len(got)]]
    assert any(r.error_type == "TruncatedInput" for r in rej)


def test_big_plain_jsonl_is_split_into_shards_without_losing_lines(tmp_path):
    rows = [{"text": f"line {i} " + "y" * (i % 97)} for i in range(5000)]
    p = write_jsonl(tmp_path / "big.jsonl", rows)
    opts = ReadOptions(shard_bytes=20_000)
    shards = plan_dataset(p, opts)
    assert len(shards) > 5
    got, rej = read_all(p, shard_bytes=20_000)
    assert [r["text"] for r in got] == [r["text"] for r in rows] and not rej


def test_json_array_parquet_csv_tsv_txt_arrow(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps([{"text": "alpha", "k": 1}, {"text": "beta", "k": 2}, 5]))
    pq.write_table(pa.table({"text": ["p1", "p2", None], "v": [1, 2, 3]}), tmp_path / "b.parquet")
    (tmp_path / "c.csv").write_text('text,k\n"hello, world",1\nbad,row,extra\nplain,3\n')
    (tmp_path / "d.tsv").write_text("text\tk\nt1\t1\n")
    (tmp_path / "e.txt").write_text("a whole document\nwith two lines\n")
    (tmp_path / "f.txt").write_bytes(b"bad \xff utf8")
    with pa.OSFile(str(tmp_path / "g.arrow"), "wb") as sink:
        with pa.ipc.new_stream(sink, pa.schema([("text", pa.string())])) as w:
            w.write_table(pa.table({"text": ["from arrow"]}))
    rows, rejects = read_all(tmp_path)
    texts = [r["text"] for r in rows]
    assert texts == ["alpha", "beta", "p1", "p2", "hello, world", "plain", "t1", "a whole document\nwith two lines\n",
                     "from arrow"]
    kinds = sorted((os.path.basename(r.source), r.error_type) for r in rejects)
    assert kinds == [("a.json", "WrongFieldType"), ("b.parquet", "MissingField"), ("c.csv", "CsvRowError"),
                     ("f.txt", "UnicodeDecodeError")]


def test_txt_line_mode_and_hf_save_to_disk_dir(tmp_path):
    p = tmp_path / "lines.txt"
    p.write_text("first\n\nsecond\nthird\n")
    rows, _ = read_all(p, params=(("txt_mode", "line"),))
    assert [r["text"] for r in rows] == ["first", "second", "third"]
    d = tmp_path / "hf"
    Dataset.from_list([{"text": f"t{i}"} for i in range(5)]).export(str(d))
    assert (d / "state.json").exists() and (d / "dataset_info.json").exists()
    rows, rej = read_all(d)
    assert [r["text"] for r in rows] == [f"t{i}" for i in range(5)] and not rej


def test_weighted_dataset_path(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"text": f"a{i}"} for i in range(1000)])
    b = write_jsonl(tmp_path / "b.jsonl", [{"text": f"b{i}"} for i in range(100)])
    ds = Dataset.load(f"0.5 {a} 2.0 {b}")
    rows = ds.to_list()
    na = sum(r["text"].startswith("a") for r in rows)
    nb = sum(r["text"].startswith("b") for r in rows)
    assert 430 < na < 570 and nb == 200
    assert len({r["id"] for r in rows}) == len(rows)
    mix = next(o for o in ds.last_report["ops"] if o["op"] == "mixture")
    assert mix["rows_in"] + mix["added"] == mix["rows_out"] + mix["removed"]
    assert Dataset.load(f"0.5 {a} 2.0 {b}").to_list() == rows  # deterministic


def test_missing_path_and_unknown_extension(tmp_path):
    with pytest.raises(FileNotFoundError):
        Dataset.load(str(tmp_path / "nope.jsonl")).head()
    (tmp_path / "x.weird").write_text("?")
    with pytest.raises(ValueError, match="cannot tell the format"):
        Dataset.load(str(tmp_path / "x.weird")).head()


def read_all_texts(path, **kw):
    opts = ReadOptions(root=os.path.dirname(str(path)), **kw)
    texts, rejects = [], []
    for s in plan_dataset(str(path), opts):
        for item in read_texts(s, opts):
            (rejects.append(item) if isinstance(item, Reject) else texts.extend(item))
    return texts, rejects


@pytest.mark.parametrize("name,data", [
    ("clean.jsonl", b"".join(json.dumps(r).encode() + b"\n" for r in GOOD) + b"\n  \n"),
    ("bad.jsonl", b"\n".join(corrupt_lines()) + b"\n"),
    ("crlf.jsonl", b"\r\n".join(json.dumps(r).encode() for r in GOOD[:5]) + b"\r\n"),
    ("nullable.jsonl", b'{"text": "a"}\n{"text": null}\n{"text": ""}\n'),
    ("big.jsonl.gz", gzip.compress(b"".join(json.dumps({"text": f"t{i} é"}).encode() + b"\n" for i in range(3000)), mtime=0)),
])
def test_text_path_reads_what_the_row_path_reads(tmp_path, name, data):
    """read_texts (orjson straight to str) gives read_shard's texts and rejects."""
    p = tmp_path / name
    p.write_bytes(data)
    rows, rejects = read_all(p, shard_bytes=4096)
    texts, t_rejects = read_all_texts(p, shard_bytes=4096)
    assert texts == [r["text"] for r in rows]
    assert sorted((r.line, r.error_type) for r in t_rejects) == sorted((r.line, r.error_type) for r in rejects)
