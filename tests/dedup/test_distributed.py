"""The resolves' distributed phases: the same removals, clusters and outputs whatever the number of workers,
and a resolve whose ``ctx.map`` runs on the local engine's worker pool (spawned processes that get every
item through pickle and see the stage's files and the scratch dir only through storage)."""
import json
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deduputil import MemoryContext, random_doc, stage_batches, write_parts

from gristmill.dataset import Dataset
from gristmill.engine.executor import LocalExecutor
from gristmill.engine.resolve_context import StageResolveContext
from gristmill.ops.dedup.exact import DocumentDeduplicator, FieldDeduplicator
from gristmill.ops.dedup.lines import (
    DocumentLineDeduplicator,
    ParagraphDeduplicator,
    SentenceSpanDeduplicator,
)
from gristmill.ops.dedup.minhash import DocumentMinhashDeduplicator
from gristmill.ops.dedup.simhash import DocumentSimhashDeduplicator


def _corpus(rng: random.Random) -> list[dict]:
    """Originals, case-changed exact copies, near copies (a few words added), repeated URLs, a shared
    boilerplate line and a shared paragraph."""
    docs = [random_doc(rng, 80) for _ in range(60)]
    boiler = "Subscribe to our newsletter for more stories like this one"
    para = "This paragraph is shared by a good number of pages of this small synthetic corpus, word for word."
    rows = [{"id": f"d{i}", "url": f"https://site/{i % 45}", "text": f"{t}\n{boiler}" if i % 4 == 0 else t}
            for i, t in enumerate(docs)]
    rows += [{"id": f"c{i}", "url": f"https://copy/{i}", "text": docs[i].upper()} for i in range(0, 60, 7)]
    rows += [{"id": f"n{i}", "url": f"https://near/{i}", "text": docs[i] + " and two more"} for i in range(2, 60, 9)]
    rows += [{"id": f"p{i}", "url": f"https://para/{i}", "text": f"{random_doc(rng, 30)}\n\n{para}"} for i in range(6)]
    rng.shuffle(rows)
    return rows


def _pipeline():
    return [FieldDeduplicator(field="url", keep="last"), DocumentDeduplicator(lowercase=True),
            DocumentSimhashDeduplicator(hamming_distance=6, num_blocks=8), DocumentMinhashDeduplicator(preset="datatrove"),
            ParagraphDeduplicator(min_length=20), DocumentLineDeduplicator(frequency_threshold=3)]


def _artifacts(report: dict) -> dict:
    got = {"export": b"".join(Path(p).read_bytes() for p in report["exported_files"])}
    for o in report["ops"]:
        for p in o.get("outputs", []):
            got[f"{o['position']}:{Path(p).name}"] = Path(p).read_bytes()
        if o.get("removed_samples"):
            got[f"{o['position']}:removed"] = Path(o["removed_samples"]).read_bytes()
        got[f"{o['position']}:counts"] = (o["rows_in"], o["rows_out"], o["removed"], o["reasons"])
    return got


def test_np1_and_np2_give_identical_removals_and_clusters(tmp_path):
    rows = _corpus(random.Random(7))
    src = write_parts(tmp_path / "in", rows, 5)
    got = {}
    for np_ in (1, 2):
        ds = Dataset.load(str(src)).process(_pipeline())
        report = ds.export(str(tmp_path / f"out{np_}.jsonl"), np=np_, work_dir=str(tmp_path / f"w{np_}"),
                           keep_removed=True)
        got[np_] = _artifacts(report)
    assert got[1] == got[2]
    # what each op removed, against an independent computation in dataset order (files, then lines)
    removed = {pos: {json.loads(x)["row"]["id"] for x in got[1].get(f"{pos}:removed", b"").splitlines()} for pos in range(4)}
    order = [r for k in range(5) for r in rows[k::5]]
    last = {r["url"]: r["id"] for r in order}
    assert removed[0] == {r["id"] for r in order if last[r["url"]] != r["id"]} and len(removed[0]) == 15
    left = [r for r in order if r["id"] not in removed[0]]
    first: dict[str, str] = {}
    exact = {r["id"] for r in left if first.setdefault(r["text"].lower().strip(), r["id"]) != r["id"]}
    assert removed[1] == exact and exact
    left = [r for r in left if r["id"] not in exact]
    seen: set[str] = set()  # a family (d{i}, its copy c{i}, its near copy n{i}) keeps its first member left
    near = {r["id"] for r in left if r["id"][0] != "p" and (r["id"][1:] in seen or seen.add(r["id"][1:]))}
    assert removed[2] | removed[3] == near and removed[2] and removed[3]
    assert got[1]["export"].count(b"Subscribe to our newsletter") == 0  # in > 3 documents: removed
    assert got[1]["export"].count(b"word for word") == 1
    assert got[1]["3:clusters.parquet"] == got[2]["3:clusters.parquet"]


def _resolve(op, shards, tmp: Path, executor):
    ctx = StageResolveContext(shards, str(tmp), 42, executor)
    state = op.resolve(ctx)
    ctx.write_removals(str(tmp / "removals"))
    removed = {p.name: pq.read_table(p).to_pylist() for p in sorted((tmp / "removals").glob("*.parquet"))}
    outputs = {p.name: p.read_bytes() for p in sorted(ctx.output_dir.iterdir())}
    stats = {k: v for k, v in op.last_stats.items() if k != "clusters_file"}
    state = {k: Path(v).read_bytes() for k, v in (state or {}).items()}  # the files finalize reads
    return removed, outputs, stats, state


@pytest.mark.parametrize("make,expect", [
    (lambda: DocumentMinhashDeduplicator(verify=True, jaccard_threshold=0.8), {"removed": 8, "clusters": 8}),
    (lambda: FieldDeduplicator(field="url", keep="last"), {"removed": 17, "clusters": 14}),  # 48 rows, 31 urls
    (lambda: SentenceSpanDeduplicator(n_sentences=2, min_length=10), {"spans_removed": 16}),
])
def test_resolve_through_the_worker_pool_equals_in_process(make, expect, tmp_path):
    rng = random.Random(3)
    docs = [random_doc(rng, 60) + ". " + random_doc(rng, 20) + ". " + random_doc(rng, 20) + "." for _ in range(40)]
    rows = [{"id": f"d{i}", "url": f"u{i % 29}", "text": t} for i, t in enumerate(docs)]
    rows += [{"id": f"c{i}", "url": f"u{i}", "text": docs[i] + " tail"} for i in range(0, 40, 5)]
    op = make()
    shards = MemoryContext(stage_batches(op, rows, 11, 4), tmp_path / "stage").shard_parts
    assert len(shards) == 5
    executor = LocalExecutor(2)
    try:
        pooled = _resolve(make(), shards, tmp_path / "pool", executor)
        assert executor._pool is not None  # the map phases ran on spawned workers
    finally:
        executor.close()
    local = _resolve(make(), shards, tmp_path / "local", None)
    assert pooled == local
    removed, _, stats, _ = local
    assert {k: stats[k] for k in expect} == expect
    assert sum(len(v) for v in removed.values()) == expect.get("removed", 0)
