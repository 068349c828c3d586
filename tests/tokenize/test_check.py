"""The fast path's check: the reference tokenizer process (and its fallbacks), the check sample."""
import json
import os
import shutil

import numpy as np
import pytest
from tokhelpers import TEXTS, make_docs, write_jsonl

from gristmill.io.base import ReadOptions
from gristmill.io.planner import plan_dataset
from gristmill.tokenize import check, shards
from gristmill.tokenize.backends import TokenizerError, load_tokenizer


def test_reference_process_equals_the_reference_and_falls_back(tok_json):
    spec = load_tokenizer(tok_json)
    docs = make_docs(30, 2) + TEXTS
    want = spec.reference().encode_batch(docs)
    rp = check.ReferenceProcess(spec)
    try:
        assert rp._proc is not None
        a = rp.encode_batch(docs)
        assert all(np.array_equal(x, y) for x, y in zip(a, want))
        rp._proc.kill()  # dies: the next batch is encoded here
        rp._proc.join()
        b = rp.encode_batch(docs[:5], 1, 0)
        assert rp._proc is None
        ref = spec.reference().encode_batch(docs[:5], 1, 0)
        assert all(np.array_equal(x, y) for x, y in zip(b, ref))
    finally:
        rp.close()


def test_reference_process_refuses_a_changed_file(tok_json, tmp_path):
    path = str(tmp_path / "tokenizer.json")
    shutil.copy(tok_json, path)
    spec = load_tokenizer(path)
    with open(path, "a") as f:
        f.write("\n")  # the run started with other bytes
    rp = check.ReferenceProcess(spec)
    try:
        with pytest.raises(TokenizerError, match="changed"):
            rp.encode_batch(TEXTS)
    finally:
        rp.close()


def test_check_sample_is_many_clipped_heads(tmp_path):
    long_doc = "word " * 5000
    write_jsonl(str(tmp_path / "a.jsonl"), [long_doc] * 40)
    opts = ReadOptions(text_key="text")
    jobs = [shards.ShardJob(0, sh, "s0", opts) for sh in plan_dataset(str(tmp_path / "a.jsonl"), opts)]
    sample = check.shard_heads(check.check_sample(jobs), 1 << 20, 32768)
    assert len(sample) >= 10 and all(len(t) <= 32768 // check.CLIP_PARTS and t.endswith(" ") for t in sample)
    assert check._clip("abc", 10) == "abc" and check._clip("x" * 50, 10) == "x" * 10


def test_check_on_the_workers_catches_a_wrong_fast_path(tok_json, corpus, tmp_path, monkeypatch):
    """When the workers take every core, the check is a task queued after the shards (this process only
    waits): a right fast path passes it and gives the reference's bytes; a wrong one (here a tampered
    conversion cache, which the workers read) is caught there and every shard is redone with the reference."""
    import glob
    import pickle

    from gristmill.tokenize import backends
    from gristmill.tokenize.run import run_tokenize
    monkeypatch.setattr(check, "usable_cores", lambda: 2)  # np=2 takes every core, whatever this machine has

    def no_thread(*a, **k):
        raise AssertionError("the check should run on a worker")
    monkeypatch.setattr(check, "BackgroundCheck", no_thread)
    from gristmill.engine.executor import LocalExecutor
    real_run = LocalExecutor.run

    def check_last(self, tasks, on_progress):  # the check's record after every shard's: phase 2 is written
        held = []  # before the verdict, its manifest held back until then (or discarded)
        for rec in real_run(self, tasks, on_progress):
            if check.is_check(rec):
                held.append(rec)
            else:
                yield rec
        yield from held
    monkeypatch.setattr(LocalExecutor, "run", check_last)
    timeline = tmp_path / "timeline.jsonl"
    monkeypatch.setenv("GRISTMILL_TIMELINE", str(timeline))

    def early_phase2() -> bool:
        got = "phase 2 written before the check ended" in timeline.read_text()
        timeline.unlink()
        return got
    cfg = {"tokenizer": tok_json, "sources": corpus, "seq_len": 64, "format": "npy", "pack": "padded"}

    def run(name, np_, **kw):
        rep = run_tokenize({**cfg, "output": str(tmp_path / name), **kw}, np=np_, work_dir=str(tmp_path / f"w{name}"),
                           progress=False)
        return rep, open(tmp_path / name / "data.npy", "rb").read()

    _, want = run("ref", 1, backend="hf")
    assert not early_phase2()
    rep, got = run("good", 2)
    assert early_phase2() and json.load(open(tmp_path / "good" / "gristmill-tokens.json"))["rows"] > 0
    assert rep["backends_used"] == ["tiktoken"] and rep["shards"] >= 2 and got == want
    assert rep["backend_info"]["verified_docs"] > 0 and rep["backend_info"]["checked"] == "while tokenizing"
    assert len(glob.glob(str(tmp_path / "wgood" / "tokenize" / "tok" / "fastpath-check-*.json"))) == 1

    spec = backends.load_tokenizer(tok_json)
    ranks, pattern, specials, nfc = backends.tiktoken_from_hf(spec.data())
    ranks[b"e"], ranks[b"t"] = ranks[b"t"], ranks[b"e"]
    monkeypatch.setenv("GRISTMILL_CACHE", str(tmp_path / "cache"))  # the workers get it (a new fork server)
    path = backends._cache_path(spec.fingerprint)
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        pickle.dump(((ranks, pattern, specials, nfc), spec.specials), f)
    wrong = backends.TiktokenBackend(ranks, pattern, specials, nfc)
    assert backends.verify(spec.reference(), wrong, make_docs(20, 0)).mismatched_docs > 0  # it is wrong
    rep, got = run("bad", 2)
    assert early_phase2()  # written from the wrong ids, then discarded: the output is the reference's
    assert rep["backend"] == "hf" and rep["backends_used"] == ["hf"] and got == want
    assert rep["backend_info"]["mismatched_docs"] > 0 and "rejected" in rep["backend_info"]["reason"]
    assert not glob.glob(str(tmp_path / "wbad" / "tokenize" / "tok" / "fastpath-check-*.json"))
