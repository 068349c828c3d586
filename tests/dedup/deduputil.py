"""Helpers shared by the dedup tests (a uniquely named module, not conftest): an in-memory ResolveContext
and a runner that applies a dedup op the way the engine does (prepare per batch → resolve over all shards
→ drop removed rows → finalize), with small shards and batches so that partition, batch and shard
boundaries are exercised; random documents for test corpora."""
from __future__ import annotations

import pickle
import random
import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from gristmill.core import columns as C
from gristmill.io.writers import ShardWriter
from gristmill.core.fused import FusedOp


class MemoryContext:
    """The shards are also written as Arrow IPC files (``shard_parts``, as a finished stage's) for the
    resolve's ``map`` phases; ``map`` runs in this process but hands every item through pickle, as the
    engine's workers get them (so an op's lazy resources are gone and nothing shared by reference works)."""

    def __init__(self, shards: list[list[pa.RecordBatch]], scratch: Path, seed: int = 42):
        self.shards = shards
        self.num_shards = len(shards)
        self.scratch_dir = scratch / "scratch"
        self.output_dir = scratch / "output"
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        self.seed = seed
        self.removed: list[dict] = []
        self.passes = 0
        self.maps = 0
        self.shard_parts = []
        for s, batches in enumerate(shards):
            w = ShardWriter(str(scratch / f"stage-{s:05d}"))
            for b in batches:
                w.write(b)
            self.shard_parts.append(w.close())

    def map(self, fn, items):
        self.maps += 1
        return [fn(pickle.loads(pickle.dumps(x))) for x in items]

    def iter_columns(self, columns):
        self.passes += 1
        cols = list(dict.fromkeys([C.ID, *columns]))
        for s, batches in enumerate(self.shards):
            off = 0
            for b in batches:
                yield s, off, b.select(cols)
                off += b.num_rows

    def remove(self, shard, rows, reason, extra=None):
        rows = np.asarray(rows, dtype=np.int64)
        extra = {k: (v.to_pylist() if isinstance(v, (pa.Array, pa.ChunkedArray)) else list(np.asarray(v).tolist()))
                 for k, v in (extra or {}).items()}
        for i, r in enumerate(rows.tolist()):
            row = self.shards[shard]
            # locate the row's batch
            off = r
            for b in row:
                if off < b.num_rows:
                    rid = b.column(C.ID)[off].as_py()
                    break
                off -= b.num_rows
            rec = {"shard": shard, "row": r, "id": rid,
                   "reason": reason if isinstance(reason, str) else reason[i]}
            rec.update({k: v[i] for k, v in extra.items()})
            self.removed.append(rec)


class Result:
    def __init__(self, kept: list[dict], ctx: MemoryContext, state):
        self.kept = kept
        self.ctx = ctx
        self.state = state
        self.removed = ctx.removed

    @property
    def kept_ids(self):
        return [r["id"] for r in self.kept]

    @property
    def removed_ids(self):
        return sorted(r["id"] for r in self.removed)

    def clusters(self):
        import pyarrow.parquet as pq
        p = self.ctx.output_dir / "clusters.parquet"
        return pq.read_table(p).to_pylist() if p.exists() else []


def stage_batches(op, rows: list[dict], shard_rows: int, batch_rows: int) -> list[list[pa.RecordBatch]]:
    """``rows`` cut into shards of batches, each batch through the op's row-local part (as a stage)."""
    fused = FusedOp([op])
    shards = []
    for s in range(0, len(rows), shard_rows):
        part = rows[s:s + shard_rows]
        batches = []
        for b in range(0, len(part), batch_rows):
            res = fused.run_batch(pa.RecordBatch.from_pylist(part[b:b + batch_rows]))
            assert not res.rejects, res.rejects
            batches.append(res.batch)
        shards.append(batches)
    return shards


def run_dedup(op, rows: list[dict], tmp_path: Path, shard_rows: int = 7, batch_rows: int = 3) -> Result:
    """Apply a RemovalOp to ``rows`` through the engine's protocol; returns kept rows (public columns)."""
    shards = stage_batches(op, rows, shard_rows, batch_rows)
    ctx = MemoryContext(shards, tmp_path)
    state = op.resolve(ctx)
    gone = {(r["shard"], r["row"]) for r in ctx.removed}
    assert len(gone) == len(ctx.removed), "a row was removed twice"
    kept = []
    for s, batches in enumerate(shards):
        off = 0
        for b in batches:
            mask = [(s, off + i) not in gone for i in range(b.num_rows)]
            off += b.num_rows
            b = b.filter(pa.array(mask))
            if b.num_rows:
                b = op.finalize(b, state)
            kept.extend(C.drop_private(b, keep_stats=False).to_pylist())
    assert len(kept) + len(ctx.removed) == len(rows), "rows lost"
    return Result(kept, ctx, state)


WORDS = ["the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "by", "as", "at", "from", "his", "her", "an", "were", "are", "which", "this", "be", "or", "has", "had", "not", "but", "first", "one", "their", "its", "new", "after", "who", "they", "have", "two", "been", "also", "other", "all", "into", "more", "time", "when", "there", "can", "during", "would", "year", "only", "over", "most", "some", "city", "such", "between", "may", "these", "people", "where", "world", "made", "used", "known", "later", "state", "national", "through", "both", "three", "under", "many", "including", "while", "well", "university", "since", "however", "part", "team", "season", "game", "series", "name", "being", "school", "about", "war", "family", "music", "river", "house", "club", "work", "age", "early", "became", "while", "album", "group", "film", "north", "south", "east", "west"]


def random_doc(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(n_words))


def run_export(tmp: Path, src: Path, op, np_: int = 2) -> dict:
    """Everything a dedup op's run writes, as bytes: the export, its removed rows, its counts and its output
    files (clusters, signatures), for comparing two runs (e.g. either side of a memory budget's switch)."""
    from gristmill.dataset import Dataset
    report = Dataset.load(str(src)).process([op]).export(str(tmp / "out.jsonl"), np=np_, work_dir=str(tmp / "w"),
                                                        keep_removed=True)
    o = next(o for o in report["ops"] if o["op"] == op.name)
    got = {"export": b"".join(Path(p).read_bytes() for p in report["exported_files"]),
           "removed": Path(o["removed_samples"]).read_bytes(),
           "counts": (o["rows_in"], o["rows_out"], o["removed"], o["reasons"])}
    for p in o.get("outputs", []):
        got[Path(p).name] = Path(p).read_bytes()
    return got


def write_parts(d: Path, rows: list[dict], n: int) -> Path:
    """``rows`` as ``n`` JSONL files in the new directory ``d`` (row i in file i mod n): ``n`` input shards."""
    d.mkdir(parents=True)
    for k in range(n):
        with open(d / f"part-{k}.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows[k::n])
    return d
