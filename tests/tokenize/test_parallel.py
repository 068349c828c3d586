"""Threads and helper processes of a tokenize run: layout, per-thread encoders, the reference tokenizer
process (and its fallbacks), errors in threads, the check sample."""
import shutil
import threading

import numpy as np
import pytest
from tokhelpers import TEXTS, make_docs, write_jsonl

from gristmill.io.base import ReadOptions
from gristmill.io.planner import plan_dataset
from gristmill.tokenize import check, shards
from gristmill.tokenize.backends import TokenizerError, load_tokenizer
from gristmill.tokenize.run import thread_layout


def test_thread_layout():
    assert thread_layout(1) == [1]
    assert thread_layout(2) == [2]
    assert thread_layout(3) == [2, 1]
    assert thread_layout(6) == [2, 2, 2]
    assert thread_layout(0) == [1]


def test_each_thread_encodes_with_its_own_encoder(tok_json):
    spec = load_tokenizer(tok_json)
    fast = spec.fast()
    docs = make_docs(60, 5) + TEXTS
    want = fast.encode_batch(docs, None, 0)
    got, encs = {}, {}

    def work(k):
        encs[k] = fast.enc
        got[k] = fast.encode_batch(docs, None, 0)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(e) for e in [fast.enc, *encs.values()]}) == 3
    for flat, lens in got.values():
        assert np.array_equal(flat, want[0]) and np.array_equal(lens, want[1])


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


def test_a_failing_thread_stops_and_raises(tmp_path, monkeypatch):
    for k in range(6):
        write_jsonl(str(tmp_path / f"p{k}.jsonl"), make_docs(5, k))
    opts = ReadOptions(text_key="text")
    jobs = [shards.ShardJob(0, sh, f"s{i}", opts) for i, sh in enumerate(plan_dataset(str(tmp_path), opts))]
    done = []

    def fake(job, settings, tok_dir, progress=None):
        if job.name == "s1":
            raise ValueError("broken shard")
        done.append(job.name)
        return job.name

    monkeypatch.setattr(shards, "tokenize_shard", fake)
    with pytest.raises(ValueError, match="broken shard"):
        settings = shards.EncodeSettings(spec=None, backend="hf", eos_id=None, bos_id=None)
        shards.tokenize_claimed(jobs, settings, {j.name: {} for j in jobs}, str(tmp_path), shards.LocalCounter(), 2,
                                lambda r: None)
    assert "s1" not in done and len(done) < len(jobs)  # the other thread stopped after its current shard


def test_check_sample_is_many_clipped_heads(tmp_path):
    long_doc = "word " * 5000
    write_jsonl(str(tmp_path / "a.jsonl"), [long_doc] * 40)
    opts = ReadOptions(text_key="text")
    jobs = [shards.ShardJob(0, sh, "s0", opts) for sh in plan_dataset(str(tmp_path / "a.jsonl"), opts)]
    sample = check.shard_heads(check.check_sample(jobs), 1 << 20, 32768)
    assert len(sample) >= 10 and all(len(t) <= 32768 // check.CLIP_PARTS and t.endswith(" ") for t in sample)
    assert check._clip("abc", 10) == "abc" and check._clip("x" * 50, 10) == "x" * 10
