"""Data-Juicer's Ray deduplicator names and document_minhash_deduplicator_with_uid against Data-Juicer 1.6.1.
The kept rows below came from DJ's own ops (``/tmp/peers/dj``, num_proc=1): document_minhash_deduplicator_with_uid
on near-duplicates of real web text with shuffled uids, and document_deduplicator (the rule DJ's Ray
exact dedup hashes with: lowercase / non-character removal, strip, one empty text kept)."""
import gzip
import json
import random
import subprocess
import sys

import pytest
import yaml

from djops_util import through_engine
from gm_testutil import SAMPLE
from gristmill.registry import create_op


def _rows():
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for line in f]
    docs = [t for t in docs if len(t) > 400][:24]
    rng = random.Random(9)
    out = []
    for i, t in enumerate(docs):
        t = " ".join(t.split()[:120])
        out.append(t)
        if i % 3 == 0:  # a near duplicate: one word changed
            w = t.split()
            j = rng.randrange(len(w))
            w[j] = w[j].upper() + "x"
            out.append(" ".join(w))
        if i % 4 == 0:
            out.append(t)  # an exact copy
    uids = list(range(len(out)))
    rng.shuffle(uids)
    return [{"text": t, "k": k, "__dj__uid": u} for k, (t, u) in enumerate(zip(out, uids))]


ROWS = _rows()
DJ_WITH_UID = {  # params -> kept "k", from Data-Juicer 1.6.1
    '{}':
        [2, 3, 4, 6, 8, 9, 11, 12, 13, 16, 17, 18, 20, 22, 23, 24, 26, 28, 29, 31, 33, 34, 36, 37],
    '{"tokenization": "character", "window_size": 8, "jaccard_threshold": 0.5}':
        [2, 3, 4, 6, 8, 9, 11, 12, 13, 16, 18, 20, 22, 23, 24, 26, 28, 29, 31, 33, 34, 36, 37],
}


@pytest.mark.parametrize("params", list(DJ_WITH_UID))
def test_with_uid_same_rows_as_data_juicer(tmp_path, params):
    out, rep = through_engine(tmp_path, ROWS, create_op("document_minhash_deduplicator_with_uid", json.loads(params)))
    assert [r["k"] for r in out] == DJ_WITH_UID[params]
    row = rep["ops"][-1]
    assert row["removed"] == len(ROWS) - len(out) and row["reasons"] == {"minhash duplicate": row["removed"]}


def test_with_uid_keeps_the_smallest_uid_of_each_cluster(tmp_path):
    """Incremental dedup: dataset A (uids 0..) already deduplicated, dataset B (uids after A's) has copies and
    near-copies of A's rows placed first: every cluster keeps A's row."""
    a = [{"text": r["text"], "src": "A"} for r in ROWS if r["k"] in (0, 3, 6)]
    b = [{"text": ROWS[1]["text"], "src": "B"}, {"text": ROWS[0]["text"], "src": "B"}, {"text": "fresh text " * 20, "src": "B"}]
    rows = [dict(r, __dj__uid=10 + i) for i, r in enumerate(b)] + [dict(r, __dj__uid=i) for i, r in enumerate(a)]
    out, _ = through_engine(tmp_path, rows, create_op("document_minhash_deduplicator_with_uid", {}))
    assert [(r["src"], r["__dj__uid"]) for r in out] == [("B", 12), ("A", 0), ("A", 1), ("A", 2)]
    plain, _ = through_engine(tmp_path / "plain", rows, create_op("document_minhash_deduplicator", {}))
    assert [r["src"] for r in plain][:2] == ["B", "B"]  # without uids the first in dataset order wins


def test_with_uid_needs_unique_uids(tmp_path):
    rows = [{"text": "a b c d e f", "__dj__uid": 1}, {"text": "a b c d e f", "__dj__uid": 1}]
    with pytest.raises(Exception, match="not unique"):
        through_engine(tmp_path, rows, create_op("document_minhash_deduplicator_with_uid", {}))
    with pytest.raises(Exception, match="need an int __dj__uid column"):
        through_engine(tmp_path / "none", [{"text": "a b c d e f"}, {"text": "a b c d e f"}],
                       create_op("document_minhash_deduplicator_with_uid", {}))
    with pytest.raises(Exception, match="verify"):
        create_op("document_minhash_deduplicator_with_uid", {"verify": True})


EXACT = ["Hello, World!", "hello world", "HELLO WORLD 2024", "Bonjour le monde.", "bonjour le monde", "", "",
         "  Hello World  ", "Grüße aus Köln", "grüße aus köln!"]
DJ_EXACT = {  # Data-Juicer 1.6.1 document_deduplicator: kept indices
    '{"lowercase": true, "ignore_non_character": true}': [0, 3, 5, 8],
    '{}': [0, 1, 2, 3, 4, 5, 7, 8, 9],
}


@pytest.mark.parametrize("params", list(DJ_EXACT))
def test_ray_document_deduplicator_same_rows_as_data_juicer(tmp_path, params):
    p = dict(json.loads(params), backend="redis", redis_address="redis://nowhere:1", dedup_set_num=8)
    out, _ = through_engine(tmp_path, [{"text": t, "k": i} for i, t in enumerate(EXACT)],
                            create_op("ray_document_deduplicator", p))
    assert [r["k"] for r in out] == DJ_EXACT[params]


def test_ray_bts_minhash_is_document_minhash(tmp_path):
    """Same rows, same clusters file as document_minhash_deduplicator; actor params accepted; sentencepiece refused."""
    ray = create_op("ray_bts_minhash_deduplicator", {"union_find_parallel_num": 4, "minhash_batch_size": 512,
                                                     "max_pending_filter_tasks": 3, "jaccard_threshold": 0.6})
    out_r, rep_r = through_engine(tmp_path / "r", ROWS, ray)
    out_d, rep_d = through_engine(tmp_path / "d", ROWS, create_op("document_minhash_deduplicator", {"jaccard_threshold": 0.6}))
    assert out_r == out_d and len(out_r) < len(ROWS)
    with pytest.raises(Exception):
        create_op("ray_bts_minhash_deduplicator", {"tokenization": "sentencepiece", "tokenizer_model": "x.model"})
    uid, _ = through_engine(tmp_path / "u", ROWS, create_op("ray_bts_minhash_deduplicator_with_uid", {}))
    assert [r["k"] for r in uid] == DJ_WITH_UID["{}"]


def test_recipe_with_ray_names_runs_locally(tmp_path):
    """A Data-Juicer Ray recipe (executor_type: ray) with both Ray dedup names runs through gristmill run."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    recipe = {"dataset_path": str(src), "export_path": str(tmp_path / "out.jsonl"), "work_dir": str(tmp_path / "w"),
              "np": 2, "process": [{"ray_document_deduplicator": {"backend": "ray_actor"}},
                                   {"ray_bts_minhash_deduplicator": {"union_find_parallel_num": 2}}]}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    report = json.loads((tmp_path / "w" / "report.json").read_text())
    exact, near = [o for o in report["ops"] if o["op"].startswith("ray_")]
    assert exact["removed"] == 6 and len(out) == near["rows_out"] == len(ROWS) - 6 - near["removed"] > 0
