"""The run's shard size: a 16th of the input rounded up to a power of two unless the section sets
``shard_bytes`` (so workers finish together), never depending on np, and the output the same bytes whatever
the shards."""
import hashlib
import os

from tokhelpers import make_docs, write_jsonl

from gristmill.tokenize import run as tokrun
from gristmill.tokenize.config import parse_section
from gristmill.tokenize.run import run_tokenize


def _digest(d):
    h = hashlib.sha256()
    for f in sorted(os.listdir(d)):
        if f.endswith(".npy") or f.endswith(".bin") or f.endswith(".idx"):
            h.update(f.encode() + open(os.path.join(d, f), "rb").read())
    return h.hexdigest()


def test_shard_size_follows_the_input_unless_set(tmp_path, monkeypatch):
    d = tmp_path / "in"
    d.mkdir()
    for k in range(2):
        with open(d / f"p{k}.jsonl", "wb") as f:
            f.truncate(24 << 20)  # sizes only: planning never reads them
    sec = {"tokenizer": "x.json", "sources": str(d), "output": str(tmp_path / "o")}
    assert tokrun.shard_bytes(parse_section(sec)) == 4 << 20  # 48 MB / 16 = 3 MB, rounded up to a power of two
    assert tokrun.shard_bytes(parse_section({**sec, "shard_bytes": 5 << 20})) == 5 << 20
    with open(d / "p1.jsonl", "ab") as f:
        f.truncate(25 << 20)  # a little more input: the same size, so the same shards of p0
    assert tokrun.shard_bytes(parse_section(sec)) == 4 << 20
    (d / "p1.jsonl").unlink()
    with open(d / "p0.jsonl", "wb") as f:
        f.truncate(100_001)
    assert tokrun.shard_bytes(parse_section(sec)) == tokrun.MIN_SHARD_BYTES
    monkeypatch.setattr(tokrun, "MIN_SHARD_BYTES", 1000)
    assert tokrun.shard_bytes(parse_section(sec)) == 8192  # 6251 rounded up


def test_auto_shards_write_the_same_bytes_as_one_shard(tok_json, tmp_path, monkeypatch):
    d = tmp_path / "in"
    d.mkdir()
    write_jsonl(str(d / "a.jsonl"), make_docs(120, seed=1))
    write_jsonl(str(d / "b.jsonl"), make_docs(60, seed=2))
    monkeypatch.setattr(tokrun, "MIN_SHARD_BYTES", 2048)  # a small input still split in many shards
    sec = {"tokenizer": tok_json, "sources": str(d), "seq_len": 64, "format": "npy", "pack": "padded"}
    one = run_tokenize({**sec, "output": str(tmp_path / "one"), "shard_bytes": 1 << 24}, np=1,
                       work_dir=str(tmp_path / "w1"), progress=False)
    auto = run_tokenize({**sec, "output": str(tmp_path / "auto")}, np=2, work_dir=str(tmp_path / "w2"),
                        progress=False)
    assert one["shards"] == 2 and auto["shards"] >= 10
    assert auto["tokens"] == one["tokens"] and auto["docs"] == one["docs"] == 180
    assert _digest(tmp_path / "auto") == _digest(tmp_path / "one")
