"""The fast path's check: the reference tokenizer process (and its fallbacks), the check sample."""
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
