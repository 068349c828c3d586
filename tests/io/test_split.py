"""Pre-splitting big compressed files for several workers, and `gristmill split` (issue 12 item 12, issue 13).

Real data: the bundled Common Crawl sample, repeated to make files of several 8 MB read chunks."""
import gzip
import json
import os
import shutil

import pytest

from gm_testutil import SAMPLE, read_jsonl
from gristmill.cli import main
from gristmill.engine.base import create_engine
from gristmill.engine.config import RunConfig
from gristmill.io.pieces import INDEX, PIECE_EXT, SPLIT_DIR
from gristmill.recipe import build_ops

COPIES = 22  # ~22 MB of JSON lines: three 8 MB read chunks, so three pieces


def _sample_rows():
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _true_line(data: bytes, needle: bytes) -> tuple[int, int]:
    """(byte offset, 1-based line number) of the line starting with ``needle``."""
    off = data.index(b"\n" + needle) + 1
    return off, data.count(b"\n", 0, off) + 1


@pytest.fixture(scope="module")
def big_jsonl(tmp_path_factory):
    """A .jsonl.gz of COPIES copies of the sample without ids (ids are then file:offset), each copy's texts
    marked so that copies differ except copy 5 = copy 4 (exact duplicates, removed by the dedup), with bad
    records in the first and in the last piece. Returns (path, decompressed bytes)."""
    rows = _sample_rows()
    lines = []
    for k in range(COPIES):
        tag = 4 if k == 5 else k
        for r in rows:
            r = {key: v for key, v in r.items() if key != "id"}
            r["text"] = f"copy {tag}: " + r["text"]
            lines.append(json.dumps(r, ensure_ascii=False).encode())
        if k == 1:
            lines += [b'{"text": 12345, "n": 1}', b"not json at all", b""]
        if k == COPIES - 2:
            lines += [b'{"text": "bad \xff utf-8"}', b'{"text": {"a": "b"}}', b'{"no_text": 1}']
    data = b"\n".join(lines) + b"\n"
    d = tmp_path_factory.mktemp("big")
    path = d / "big.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(data)
    return path, data


def _run(data_path, tmp, name, np_, process, export=".jsonl", log=None, **kw):
    ops = build_ops(process)
    cfg = RunConfig(dataset_path=str(data_path), work_dir=str(tmp / f"work-{name}"),
                    export_path=str(tmp / f"out-{name}{export}"), np=np_, shard_bytes=1 << 20, progress=False,
                    **kw)
    return create_engine(cfg, log=log).run(ops)


def _rejects(work, drop_shard=True):
    path = os.path.join(work, "rejects.jsonl")
    if not os.path.exists(path):
        return []
    out = [json.loads(line) for line in open(path, "rb")]
    if drop_shard:  # the work dir's shard number of the record: the only field that names the pieces
        for r in out:
            r.pop("shard")
    return out


FILTER_DEDUP = [{"words_num_filter": {"min_num": 30}}, {"document_deduplicator": {"lowercase": True}}]


def test_big_jsonl_gz_is_split_and_gives_the_same_bytes(big_jsonl, tmp_path):
    path, data = big_jsonl
    logs = []
    one = _run(path, tmp_path, "np1", 1, FILTER_DEDUP)
    two = _run(path, tmp_path, "np2", 2, FILTER_DEDUP, log=logs.append)
    assert one["shards"] == 1
    assert two["shards"] >= 2  # 22 MB in read chunks of 8 MB or more, pieces of at least 1 MB: one chunk each
    assert any("splitting" in m for m in logs) and any(f"{two['shards']} pieces" in m for m in logs)
    pieces = sorted((tmp_path / "work-np2" / SPLIT_DIR).glob(f"*/*{PIECE_EXT}"))
    assert len(pieces) == two["shards"] and sum(p.stat().st_size for p in pieces) == len(data)
    # the export, the counts and the removed samples are those of the unsplit read
    assert (tmp_path / "out-np1.jsonl").read_bytes() == (tmp_path / "out-np2.jsonl").read_bytes()
    rows = read_jsonl(tmp_path / "out-np2.jsonl")
    n = len(_sample_rows())
    assert {r["text"].split(":")[0] for r in rows} == {f"copy {k}" for k in range(COPIES) if k != 5}
    assert [o["removed"] for o in two["ops"]] == [o["removed"] for o in one["ops"]]
    kept4 = sum(r["text"].startswith("copy 4:") for r in rows)
    assert kept4 > n // 2 and two["ops"][2]["removed"] == kept4  # copy 5 (= copy 4): every row a duplicate
    assert two["rows_out"] == one["rows_out"]
    for name in os.listdir(tmp_path / "work-np1" / "removed"):
        assert (tmp_path / "work-np1" / "removed" / name).read_bytes() == \
            (tmp_path / "work-np2" / "removed" / name).read_bytes()
    # ids are offsets in the decompressed original, in every piece
    ids = [r["id"] for r in read_jsonl(tmp_path / "out-np2.jsonl")]
    last = rows[-1]
    assert ids[-1].startswith("big.jsonl.gz:") and last["text"].startswith(f"copy {COPIES - 1}:")
    off = int(ids[-1].rsplit(":", 1)[1])
    assert json.loads(data[off:data.index(b"\n", off)])["text"] == last["text"]
    # rejects: the original file, byte offset and line number in it, also from the last piece
    r1, r2 = _rejects(tmp_path / "work-np1"), _rejects(tmp_path / "work-np2")
    assert r1 == r2 and len(r2) == 5
    for needle, rec in [(b'{"text": 12345', r2[1]), (b"not json", r2[0]), (b'{"text": "bad \xff', r2[2]),
                        (b'{"text": {"a"', r2[3]), (b'{"no_text"', r2[4])]:
        assert (rec["source"], rec["offset"], rec["line"]) == (str(path), *_true_line(data, needle)), rec
    assert r2[4]["offset"] > len(data) * 2 // 3  # in the last piece


def test_pieces_are_reused_and_a_changed_file_is_split_again(big_jsonl, tmp_path):
    src, _ = big_jsonl
    path = tmp_path / "in.jsonl.gz"
    shutil.copy(src, path)
    logs = []
    _run(path, tmp_path, "a", 2, [{"words_num_filter": {"min_num": 30}}], log=logs.append)
    split = tmp_path / "work-a" / SPLIT_DIR
    (key,) = os.listdir(split)
    stamp = {p: p.stat().st_mtime_ns for p in (split / key).iterdir()}
    logs.clear()
    rep = _run(path, tmp_path, "a", 2, [{"words_num_filter": {"min_num": 31}}], log=logs.append)  # a rerun
    assert not any("splitting" in m for m in logs) and rep["shards"] >= 2
    assert {p: p.stat().st_mtime_ns for p in (split / key).iterdir()} == stamp
    # the file changes: it is split again, the old pieces go
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(gzip.open(src).read()[: 12 << 20].rsplit(b"\n", 1)[0] + b"\n")
    logs.clear()
    rep = _run(path, tmp_path, "a", 2, [{"words_num_filter": {"min_num": 31}}], log=logs.append)
    assert any("splitting" in m for m in logs)
    (key2,) = os.listdir(split)
    assert key2 != key and rep["shards"] >= 2
    # a run that splits nothing (np=1) leaves no pieces behind
    _run(path, tmp_path, "a", 1, [{"words_num_filter": {"min_num": 31}}])
    assert not split.exists()


def test_truncated_file_keeps_its_file_reject(big_jsonl, tmp_path):
    src, data = big_jsonl
    raw = src.read_bytes()
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(raw[: len(raw) * 9 // 10])
    one = _run(path, tmp_path, "np1", 1, [{"words_num_filter": {"min_num": 30}}])
    two = _run(path, tmp_path, "np2", 2, [{"words_num_filter": {"min_num": 30}}])
    assert one["shards"] == 1 and two["shards"] >= 2
    assert (tmp_path / "out-np1.jsonl").read_bytes() == (tmp_path / "out-np2.jsonl").read_bytes()
    r1, r2 = _rejects(tmp_path / "work-np1"), _rejects(tmp_path / "work-np2")
    assert r1 == r2
    assert r2[-1]["error_type"] == "TruncatedInput" and r2[-1]["file_error"] is True
    assert r2[-1]["source"] == str(path)
    read = [o for o in two["ops"] if o["op"] == "read"][0]
    assert read["file_errors"] == 1 and read == [o for o in one["ops"] if o["op"] == "read"][0] | \
        {"seconds": read["seconds"]}


def test_line_mode_text_batches_and_line_numbers(tmp_path):
    """Compressed text in line mode: pieces end where a batch ends, so a Parquet export (one row group per
    batch) is byte-identical; an invalid line in a later piece has its true line number."""
    texts = [t for r in _sample_rows() for t in r["text"].split("\n")]
    lines = []
    for k in range(20):
        lines += [f"{k} {t}".encode() if t.strip() else b"" for t in texts]
        if k == 17:
            lines += [b"bad \xff line", b"   "]
    data = b"\n".join(lines) + b"\n"
    path = tmp_path / "lines.txt.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(data)
    kw = dict(reader_params={"txt_mode": "line"}, batch_size=97)
    one = _run(path, tmp_path, "np1", 1, [{"words_num_filter": {"min_num": 3}}], export=".parquet", **kw)
    two = _run(path, tmp_path, "np2", 2, [{"words_num_filter": {"min_num": 3}}], export=".parquet", **kw)
    assert one["shards"] == 1 and two["shards"] >= 3
    assert (tmp_path / "out-np1.parquet").read_bytes() == (tmp_path / "out-np2.parquet").read_bytes()
    import pyarrow.parquet as pq
    md = pq.ParquetFile(tmp_path / "out-np2.parquet").metadata
    assert md.num_rows == one["rows_out"] and md.num_row_groups > 100
    r1, r2 = _rejects(tmp_path / "work-np1"), _rejects(tmp_path / "work-np2")
    assert r1 == r2 and len(r2) == 1
    assert (r2[0]["offset"], r2[0]["line"]) == _true_line(data, b"bad \xff line")
    assert r2[0]["line"] > data.count(b"\n") // 2


def test_several_files_split_at_once(big_jsonl, tmp_path):
    """Two big compressed files for three workers: both split (on threads), in dataset order."""
    src, _ = big_jsonl
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(src, d / "a.jsonl.gz")
    shutil.copy(src, d / "b.jsonl.gz")
    ops = [{"words_num_filter": {"min_num": 30}}]
    one = _run(d, tmp_path, "np1", 1, ops)
    three = _run(d, tmp_path, "np3", 3, ops)
    assert one["shards"] == 2 and three["shards"] >= 4
    assert len(os.listdir(tmp_path / "work-np3" / SPLIT_DIR)) == 2
    assert (tmp_path / "out-np1.jsonl").read_bytes() == (tmp_path / "out-np3.jsonl").read_bytes()
    ids = [r["id"] for r in read_jsonl(tmp_path / "out-np3.jsonl")]
    assert ids[0].startswith("a.jsonl.gz:") and ids[-1].startswith("b.jsonl.gz:")


def test_few_shards_are_reported_with_the_split_command(tmp_path):
    logs = []
    _run(SAMPLE, tmp_path, "few", 3, [{"words_num_filter": {"min_num": 30}}], log=logs.append)
    hint = [m for m in logs if "gristmill split" in m]
    assert hint and f"gristmill split {SAMPLE} -o DIR -n 3" in hint[0] and "1 shard(s) for np=3" in hint[0]


# -- gristmill split -------------------------------------------------------------------------------

def _parts(d):
    return sorted(p for p in os.listdir(d) if p.startswith("part-"))


def test_split_command_reshards_in_order_with_fields_unchanged(tmp_path, capsys):
    out = tmp_path / "parts"
    assert main(["split", str(SAMPLE), "-o", str(out), "-n", "4"]) == 0
    names = _parts(out)
    assert names == [f"part-{i:05d}-of-00004.jsonl" for i in range(4)]
    got = [r for n in names for r in read_jsonl(out / n)]
    assert got == _sample_rows()  # every row once, in order, each field value for value (nested dicts too)
    sizes = [(out / n).stat().st_size for n in names]
    total = sum(sizes)
    biggest_row = max(len(json.dumps(r)) for r in got)
    assert all(abs(s - total / 4) <= biggest_row for s in sizes)  # about equal: within one row of a quarter
    printed = capsys.readouterr()
    assert "179 rows in 4 files" in printed.err
    assert [int(line.split("\t")[1].split()[0]) for line in printed.out.splitlines()] == \
        [len(read_jsonl(out / n)) for n in names]
    # the split files give the same run results as the original (ids kept)
    ops = [{"words_num_filter": {"min_num": 50}}, {"document_deduplicator": {"lowercase": True}}]
    a = _run(SAMPLE, tmp_path, "orig", 1, ops)
    b = _run(out, tmp_path, "parts", 2, ops)
    assert b["shards"] == 4
    assert (tmp_path / "out-orig.jsonl").read_bytes() == (tmp_path / "out-parts.jsonl").read_bytes()
    assert a["rows_out"] == b["rows_out"]


def test_split_command_compressed_ids_and_rejects(tmp_path, capsys):
    src = tmp_path / "in"
    src.mkdir()
    rows = [{"text": f"row {i}", "meta": {"k": i} if i % 2 else [i, None], "big": 2 ** 70 + i} for i in range(50)]
    with open(src / "a.jsonl", "w") as f:
        for i, r in enumerate(rows):
            f.write(json.dumps(r) + "\n")
            if i == 10:
                f.write('{"text": 5}\n')
    out = tmp_path / "out"
    assert main(["split", str(src), "-o", str(out), "-n", "3", "--compression", "gz"]) == 0
    names = _parts(out)
    assert names == [f"part-{i:05d}-of-00003.jsonl.gz" for i in range(3)]
    got = [r for n in names for r in read_jsonl(out / n)]
    assert [{k: v for k, v in r.items() if k != "id"} for r in got] == rows
    offsets = [int(r["id"].split(":")[1]) for r in got]
    assert got[0]["id"] == "a.jsonl:0" and offsets == sorted(offsets)  # the ids the original read gives
    err = capsys.readouterr().err
    assert "1 record(s) rejected" in err
    rej = read_jsonl(out / ".gristmill-split-rejects.jsonl")
    assert rej[0]["error_type"] == "WrongFieldType" and rej[0]["line"] == 12
    # the parts read back as a dataset: the hidden record and rejects are not data
    again = tmp_path / "again"
    assert main(["split", str(out), "-o", str(again), "-n", "1"]) == 0
    assert read_jsonl(again / "part-00000-of-00001.jsonl") == got


def test_split_command_refusals_and_reruns(tmp_path, capsys):
    out = tmp_path / "out"
    # never over or inside the input
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(SAMPLE, data / "s.jsonl.gz")
    assert main(["split", str(data), "-o", str(data / "sub"), "-n", "2"]) == 2
    assert "inside the input directory" in capsys.readouterr().err
    assert not (data / "sub").exists()
    # a file it did not write is never replaced
    out.mkdir()
    (out / "part-00001-of-00002.jsonl").write_text("mine\n")
    (out / "notes.txt").write_text("keep\n")
    assert main(["split", str(data), "-o", str(out), "-n", "2"]) == 2
    assert "not written by gristmill split" in capsys.readouterr().err
    assert (out / "part-00001-of-00002.jsonl").read_text() == "mine\n" and not (out / "part-00000-of-00002.jsonl").exists()
    # its own files are replaced, and a rerun with another N removes the earlier parts
    os.unlink(out / "part-00001-of-00002.jsonl")
    assert main(["split", str(data), "-o", str(out), "-n", "5"]) == 0
    assert len(_parts(out)) == 5
    assert main(["split", str(data), "-o", str(out), "-n", "2"]) == 0
    assert _parts(out) == ["part-00000-of-00002.jsonl", "part-00001-of-00002.jsonl"]
    assert (out / "notes.txt").read_text() == "keep\n"
    assert sum(len(read_jsonl(out / n)) for n in _parts(out)) == 179
    with pytest.raises(SystemExit) as e:  # argparse: -n must be >= 1
        main(["split", str(data), "-o", str(out), "-n", "0"])
    assert e.value.code == 2
