import numpy as np
import pyarrow as pa
from deduputil import run_dedup

from gristmill.ops.dedup._partition import FANOUT, Shuffle
from gristmill.ops.dedup._unionfind import UnionFind
from gristmill.ops.dedup.lines import (
    DocumentLineDeduplicator,
    ParagraphDeduplicator,
    SentenceSpanDeduplicator,
    join_kept,
    split_units,
)

BOILER = "Copyright 2019 Example Corp. All rights reserved."


def test_split_and_join_round_trip():
    t = pa.array(["a\n\nb\n \n\nc\n", "", "one\ntwo", "x. Y! z"])
    for sep in ["\n", r"\n[ \t]*\n\s*", SentenceSpanDeduplicator.sep_regex]:
        u = split_units(t, sep)
        keep = np.ones(len(u.values), bool)
        assert join_kept(u, keep).to_pylist() == t.to_pylist()


def test_line_dedup_data_juicer_semantics(tmp_path):
    rows = [{"id": i, "text": f"unique line number {i}\n{BOILER}\n#\n{{}}\nx"} for i in range(8)]
    rows.append({"id": 99, "text": f"{BOILER}\nonly here"})
    res = run_dedup(DocumentLineDeduplicator(frequency_threshold=6), rows, tmp_path)
    assert len(res.kept) == 9 and res.removed == []
    # the boilerplate line (in 9 docs > 6) goes everywhere; headers, brackets and other lines stay
    assert res.kept[0]["text"] == "unique line number 0\n#\n{}\nx"
    assert res.kept[-1]["text"] == "only here"
    # under the threshold nothing changes
    res = run_dedup(DocumentLineDeduplicator(frequency_threshold=9), rows, tmp_path / "b")
    assert [r["text"] for r in res.kept] == [r["text"] for r in rows]


PARA = "This paragraph is repeated across many pages of the same website, word for word."


def test_paragraph_first_occurrence_kept(tmp_path):
    rows = [
        {"id": "a", "text": f"Intro of a.\n\n{PARA}\n\nOutro of a."},
        {"id": "b", "text": f"{PARA}\n\nBody of b is different and long enough to matter here.\n\n{PARA}"},
        {"id": "c", "text": "Short.\n\nShort."},
    ]
    res = run_dedup(ParagraphDeduplicator(min_length=20), rows, tmp_path)
    kept = {r["id"]: r["text"] for r in res.kept}
    assert kept["a"] == rows[0]["text"]  # first occurrence untouched
    assert kept["b"] == "Body of b is different and long enough to matter here.\n\n"
    assert kept["c"] == "Short.\n\nShort."  # under min_length: never removed


def test_sentence_spans_c4_style(tmp_path):
    s = ["The first sentence is here.", "A second one follows it.", "Then a third sentence ends.",
         "Finally a fourth one."]
    rows = [{"id": "x", "text": " ".join(s)},
            {"id": "y", "text": "Different opening words. " + " ".join(s[:3]) + " Closing remark here."}]
    res = run_dedup(SentenceSpanDeduplicator(n_sentences=3, min_length=10), rows, tmp_path)
    kept = {r["id"]: r["text"] for r in res.kept}
    assert kept["x"] == rows[0]["text"]
    assert kept["y"] == "Different opening words. Closing remark here."


def test_union_find_matches_naive(rng):
    n = 300
    edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(250)]
    uf = UnionFind(n)
    for s in range(0, len(edges), 37):  # several batches
        e = np.array(edges[s:s + 37])
        uf.union(e[:, 0], e[:, 1])
    roots = uf.roots()
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x
    for a, b in edges:
        ra, rb = find(a), find(b)
        parent[max(ra, rb)] = min(ra, rb)
    assert roots.tolist() == [find(x) for x in range(n)]  # root = smallest member


def test_shuffle_splits_big_partitions_and_keeps_global_order(tmp_path):
    """Three sources (shards) with local row numbers: every partition comes back in global row order, a
    heavy key stays in one array although its partition is split, and a retried source rewrites its files."""
    dt = np.dtype([("key", "<u8"), ("g", "<i8")])
    rng = np.random.default_rng(0)
    rec = np.empty(20000, dt)
    rec["key"] = rng.integers(0, 2**63, 20000, dtype=np.uint64) * np.uint64(2) | np.uint64(1)
    rec["key"][:5000] = rec["key"][0]  # one heavy key stays together
    rec["g"] = np.arange(20000)
    bounds = [0, 7000, 12000, 20000]
    sh = Shuffle(str(tmp_path / "sh"), dt, tuple(bounds[:-1]), max_part_bytes=2048)
    for i in range(3):
        for attempt in range(2):  # the second attempt replaces the first
            w = sh.writer(i)
            w.buffer_rows = 300
            for s in range(bounds[i], bounds[i + 1], 1000):
                local = rec[s:min(s + 1000, bounds[i + 1])].copy()
                local["g"] -= bounds[i]
                w.add(local)
            w.flush()
    parts = [a for p in range(FANOUT) for a in sh.partition(p)]
    allrec = np.concatenate(parts)
    assert sorted(allrec["g"].tolist()) == list(range(20000))
    heavy = [p for p in parts if (p["key"] == rec["key"][0]).any()]
    assert len(heavy) == 1 and (heavy[0]["key"] == rec["key"][0]).sum() == 5000
    assert all((np.diff(p["g"]) > 0).all() for p in parts)  # stream order kept
    assert not list((tmp_path / "sh").glob("split-*"))
    sh.remove()
    assert not (tmp_path / "sh").exists()
