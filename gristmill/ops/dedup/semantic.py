"""semantic_deduplicator: SemDeDup-style removal of documents whose embeddings are nearly the same.

Stages (the engine runs them): ``compute_hash`` is row-local and fused into the previous stage: it embeds
the text (or reads an embedding column a ``text_embedding_mapper`` wrote) into a private column of unit
vectors. ``resolve`` streams them in dataset order to files of the scratch dir (``_semantic_store``: read
back memory-mapped, a block of ``GRISTMILL_SEMDEDUP_MEMORY`` at a time; the driver never holds the matrix),
clusters them with seeded spherical k-means (one cluster, an exact search, for small data; the centroids in
a scratch file past the budget), and runs the clusters on the engine's workers: inside a cluster rows go in dataset
order and a row whose cosine similarity to an earlier kept row reaches ``threshold`` is removed, pointing at
the most similar kept row (the earliest on ties). Nothing chains: a row is only ever removed for a row that
is kept.
"""
from __future__ import annotations

import math
import shutil
from typing import Literal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Deduplicator
from ..classify import _embeddings as E
from ..classify.embedding import EmbeddingParams, check_model, embedder
from . import _semantic as S
from . import _semantic_store as ST

REASON = "semantic duplicate"
PAIRS_FILE = "semantic_duplicates.parquet"
PAIRS_SCHEMA = pa.schema([("id", pa.string()), ("kept_id", pa.string()), ("similarity", pa.float64()),
                          ("cluster", pa.int64())])


@register("semantic_deduplicator")
class SemanticDeduplicator(Deduplicator):
    """Remove documents whose text embedding has cosine similarity ≥ ``threshold`` with a kept document
    (SemDeDup: k-means clusters of the embeddings, then the pairs inside each cluster). Up to
    ``exact_max_rows`` embedded rows are one cluster (every pair is compared); above, ``num_clusters`` (default:
    one per ``rows_per_cluster`` rows) seeded k-means clusters, so a pair split across two clusters is not
    found (SemDeDup's trade). Rows are taken in dataset order: the first of a group is kept, and a later row
    goes when it is similar enough to a kept one, naming the most similar kept row (earliest on ties) in its
    ``kept_id`` and the ``similarity``. An empty text never matches. ``semantic_duplicates.parquet`` (the
    op's output) lists every removed row with its kept id, similarity and cluster; ``save_embeddings_path``
    writes every row's id and embedding (Parquet) for reuse."""

    inputs = ("{text_key}",)
    outputs = ()

    class Params(EmbeddingParams):
        threshold: float = Field(0.9, gt=0.0, le=1.0, description="Cosine similarity at or above which a row "
                                                                  "duplicates a kept row.")
        embedding_key: str | None = Field(
            None, description="Field holding precomputed embeddings (e.g. text_embedding_mapper's); rows "
                              "without it are embedded with embedding_model.")
        exact_max_rows: int = Field(20_000, ge=1, description="Up to this many rows: one cluster (exact "
                                                             "search), unless num_clusters is set.")
        num_clusters: int | None = Field(None, ge=1, description="k-means clusters (default: rows / "
                                                                 "rows_per_cluster above exact_max_rows).")
        rows_per_cluster: int = Field(2_000, ge=2, description="Rows per cluster when num_clusters is not set.")
        kmeans_iterations: int = Field(20, ge=1, description="k-means iterations at most.")
        kmeans_sample: int = Field(100_000, ge=1, description="Rows k-means is fitted on (all rows are then "
                                                              "assigned to their nearest centroid).")
        seed: int = Field(42, description="Seed of the k-means sample and start.")
        store_dtype: Literal["float32", "float16"] = Field(
            "float32", description="How the resolve stores the embeddings on disk (float16: half the disk and page "
                                   "cache; similarities rounded to float16 inputs, so results can move).")
        save_embeddings_path: str | None = trust.path_param(
            "write", None, description="Write every row's id and embedding to this Parquet file.")

    def __init__(self, **params):
        super().__init__(**params)
        check_model(self)

    def models(self) -> list[str]:
        return E.store_names(self.params.embedding_model)

    @property
    def column(self) -> str:
        return self.tmp_column("emb")

    def compute_hash(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        key = self.params.embedding_key
        col = C.get_field(batch, key) if key else None
        if col is not None:
            if isinstance(col, pa.ChunkedArray):
                col = col.combine_chunks()
            if pa.types.is_fixed_size_list(col.type) and col.null_count == 0:  # text_embedding_mapper's column
                e = E.normalise(col.flatten().to_numpy(zero_copy_only=False).reshape(len(col), col.type.list_size))
                arr = pa.FixedSizeListArray.from_arrays(pa.array(e.ravel()), col.type.list_size)
                return C.set_column(batch, self.column, arr)
            dim = col.type.list_size if pa.types.is_fixed_size_list(col.type) else None
            vals = [np.asarray(v if v is not None else [], np.float32) for v in col.to_pylist()]
            dims = {v.size for v in vals if v.size}
            if dim is None:
                if len(dims) > 1:
                    raise ValueError(f"{self.name}: embeddings of different lengths in one dataset "
                                     f"({key!r}: {sorted(dims)})")
                dim = dims.pop() if dims else 1
            e = np.zeros((len(vals), dim), np.float32)
            for i, v in enumerate(vals):
                if v.size == dim:
                    e[i] = v
            e = E.normalise(e)
        else:
            model = embedder(self)
            e = model.encode(self.text(batch).to_pylist())
            dim = model.dim
        arr = pa.FixedSizeListArray.from_arrays(pa.array(e.astype(np.float32).ravel()), dim)
        return C.set_column(batch, self.column, arr)

    def resolve_columns(self) -> list[str]:
        return [C.ID, self.column]

    def resolve(self, ctx):
        p = self.params
        scratch = Path(ctx.scratch_dir) / f"semantic-{self.position}"
        store = ST.EmbeddingStore(scratch, p.store_dtype, self.name)
        for shard, offset, batch in ctx.iter_columns([self.column]):  # to disk, batch by batch
            col = batch.column(batch.schema.get_field_index(self.column))
            if isinstance(col, pa.ChunkedArray):
                col = col.combine_chunks()
            if not pa.types.is_fixed_size_list(col.type):  # rows' vectors of several lengths met in one batch
                raise ValueError(f"{self.name}: embeddings of different lengths in one dataset")
            e = col.flatten().to_numpy(zero_copy_only=False).reshape(batch.num_rows, col.type.list_size)
            store.add(shard, offset, batch.column(batch.schema.get_field_index(C.ID)), e)
        store.finish()
        n = store.n
        if n == 0:
            self.last_stats = {"rows": 0, "removed": 0, "clusters": 0}
            return None
        if p.save_embeddings_path:
            _save_embeddings(p.save_embeddings_path, store)
        valid = store.valid()  # an empty text (zero vector) never matches
        nv = int(valid.shape[0])
        k = p.num_clusters or (1 if nv <= p.exact_max_rows else math.ceil(nv / p.rows_per_cluster))
        mem_path, off_path = str(scratch / "members.npy"), str(scratch / "offsets.npy")
        if nv and min(int(k), nv) > 1:
            labels = np.lib.format.open_memmap(str(scratch / "labels.npy"), "w+", np.int64, (nv,))
            S.kmeans(ST.ValidRows(store.emb(), valid), k, p.seed, p.kmeans_iterations, p.kmeans_sample, out=labels,
                     work=str(scratch))
            step = ST.block_rows(8)
            k = int(max(np.max(labels[a:a + step]) for a in range(0, nv, step))) + 1
            members = np.lib.format.open_memmap(mem_path, "w+", np.int64, (nv,))
            offsets = S.cluster_members(labels, valid, k, members, ST.block_rows(32))
            members.flush()
            del labels, members
        else:  # one cluster (the exact search): its members are the valid rows
            k = 1 if nv else 0
            members = np.lib.format.open_memmap(mem_path, "w+", np.int64, (nv,))
            step = ST.block_rows(16)
            for a in range(0, nv, step):
                members[a:a + step] = valid[a:a + step]
            members.flush()
            del members
            offsets = np.array([0, nv] if nv else [0], np.int64)
        np.save(off_path, offsets)
        sizes = np.diff(offsets)
        tasks = [(store.emb_spec, mem_path, off_path, a, b, float(p.threshold), str(scratch / f"pairs-{a:07d}.bin"))
                 for a, b in S.task_ranges(sizes, max(1, min(k, 64)))]
        removed = _emit(ctx, store, ctx.map(S.dedup_clusters, tasks), scratch)
        self.last_stats = {"rows": n, "removed": removed, "clusters": k, "embedded_rows": nv}
        return None


PAIR = S.PAIR
ROW_GROUP = 1 << 20  # pq.write_table's default rows per row group


def _emit(ctx, store: ST.EmbeddingStore, results: list[str], scratch: Path) -> int:
    """The tasks' (gone, kept, similarity, cluster) records, in the order of the removed rows: read a block
    at a time (``GRISTMILL_SEMDEDUP_MEMORY`` ÷ 112 B: 28 B records and their sorted copies) and bucketed by row range into files (ranges
    of ``GRISTMILL_SEMDEDUP_MEMORY`` ÷ 64 rows), then range by range sorted,
    handed to the removals (with the kept row's id and the similarity) and written to
    ``semantic_duplicates.parquet`` in row groups of 1 Mi rows, so the driver holds one range and one row
    group, not every removed row. Returns the number of removed rows."""
    span = ST.block_rows(64, cap=1 << 40)
    bdir = scratch / "pairs-by-range"
    shutil.rmtree(bdir, ignore_errors=True)  # a retried resolve appends to fresh files
    bdir.mkdir(parents=True)
    buckets: set[int] = set()
    for rec in (r for path in results for r in S.read_pairs(path, ST.block_rows(4 * PAIR.itemsize))):
        b = rec["gone"] // span
        o = np.argsort(b, kind="stable")
        rec, b = rec[o], b[o]
        cuts = np.flatnonzero(np.diff(b)) + 1
        for part in np.split(rec, cuts):
            k = int(part["gone"][0] // span)
            buckets.add(k)
            with open(bdir / f"{k:012d}.bin", "ab") as f:
                f.write(part.tobytes())
    ids = store.ids()
    out_dir = Path(getattr(ctx, "output_dir", None) or ctx.scratch_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / (PAIRS_FILE + ".tmp")
    pending: list[pa.Table] = []
    held = total = 0
    writer = None

    def flush(final: bool):
        nonlocal pending, held, writer
        t = pa.concat_tables(pending) if pending else PAIRS_SCHEMA.empty_table()
        while t.num_rows >= ROW_GROUP or (final and t.num_rows):
            writer = writer or pq.ParquetWriter(tmp, PAIRS_SCHEMA)
            writer.write_table(t.slice(0, ROW_GROUP).combine_chunks())
            t = t.slice(ROW_GROUP)
        pending, held = ([t] if t.num_rows else []), t.num_rows

    for k in sorted(buckets):
        rec = np.fromfile(bdir / f"{k:012d}.bin", PAIR)
        rec = rec[np.argsort(rec["gone"], kind="stable")]
        gone = rec["gone"]
        kept_ids = store.take_ids(rec["kept"], ids)
        sims = np.round(rec["sim"].astype(np.float64), 6)
        shard_of, off_of = store.locate(gone)
        for s in np.unique(shard_of).tolist():
            sel = np.flatnonzero(shard_of == s)
            ctx.remove(s, off_of[sel], REASON, {"kept_id": kept_ids.take(pa.array(sel)),
                                                "similarity": pa.array(sims[sel], pa.float64())})
        pending.append(pa.table([store.take_ids(gone, ids), kept_ids, pa.array(sims, pa.float64()),
                                 pa.array(rec["cluster"])], schema=PAIRS_SCHEMA))
        held += gone.size
        total += gone.size
        if held >= ROW_GROUP:
            flush(False)
    flush(True)
    if writer is None:  # nothing removed: an empty file, as pq.write_table writes one
        pq.write_table(PAIRS_SCHEMA.empty_table(), tmp)
    else:
        writer.close()
    tmp.replace(out_dir / PAIRS_FILE)
    return total


def _save_embeddings(path: str, store: ST.EmbeddingStore) -> None:
    """``path``: Parquet of (id, embedding) in dataset order, written to a temp name and renamed; read from
    the store a block at a time (row groups of 1 Mi rows, as ``pq.write_table``'s, unless the memory budget
    makes them smaller)."""
    import os
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    ids = store.ids()
    schema = pa.schema([("id", pa.string()), ("embedding", pa.list_(pa.float32(), store.dim))])
    with pq.ParquetWriter(tmp, schema) as w:
        for a, x in store.blocks(ST.block_rows(store.dim * 4 + 64)):
            emb = pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), x.shape[1])
            w.write_table(pa.table({"id": ids.slice(a, x.shape[0]).combine_chunks(), "embedding": emb}, schema=schema),
                          row_group_size=1 << 20)
    os.replace(tmp, path)
