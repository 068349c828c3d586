"""semantic_deduplicator: SemDeDup-style removal of documents whose embeddings are nearly the same.

Stages (the engine runs them): ``compute_hash`` is row-local and fused into the previous stage: it embeds
the text (or reads an embedding column a ``text_embedding_mapper`` wrote) into a private column of unit
vectors. ``resolve`` reads them in dataset order into one matrix on the driver (4 bytes × dimensions per
row: 1 KiB a row for WordLlama's 256), clusters it with seeded spherical k-means (one cluster, an exact
search, for small data), and runs the clusters on the engine's workers: inside a cluster rows go in dataset
order and a row whose cosine similarity to an earlier kept row reaches ``threshold`` is removed, pointing at
the most similar kept row (the earliest on ties). Nothing chains: a row is only ever removed for a row that
is kept.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Deduplicator
from ..classify import _embeddings as E
from ..classify.embedding import EmbeddingParams, check_model, embedder
from . import _semantic as S

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
        parts, ids, shard_of, off_of = [], [], [], []
        for shard, offset, batch in ctx.iter_columns([self.column]):
            col = batch.column(batch.schema.get_field_index(self.column))
            if isinstance(col, pa.ChunkedArray):
                col = col.combine_chunks()
            if not pa.types.is_fixed_size_list(col.type):  # rows' vectors of several lengths met in one batch
                raise ValueError(f"{self.name}: embeddings of different lengths in one dataset")
            parts.append(col.flatten().to_numpy(zero_copy_only=False).reshape(batch.num_rows, col.type.list_size))
            idc = batch.column(batch.schema.get_field_index(C.ID))
            ids.append(idc.combine_chunks() if isinstance(idc, pa.ChunkedArray) else idc)
            shard_of.append(np.full(batch.num_rows, shard, np.int64))
            off_of.append(offset + np.arange(batch.num_rows, dtype=np.int64))
        n = sum(x.shape[0] for x in parts)
        if n == 0:
            self.last_stats = {"rows": 0, "removed": 0, "clusters": 0}
            return None
        dims = {x.shape[1] for x in parts if x.any()}  # a batch of rows without vectors has no dimension
        if len(dims) <= 1:
            d = dims.pop() if dims else parts[0].shape[1]
            parts = [x if x.shape[1] == d else np.zeros((x.shape[0], d), np.float32) for x in parts]
        elif len(dims) > 1:
            raise ValueError(f"{self.name}: embeddings of different lengths in one dataset ({sorted(dims)})")
        x = np.ascontiguousarray(np.concatenate(parts).astype(np.float32))
        del parts
        id_arr = pa.concat_arrays([a if pa.types.is_string(a.type) else pc.cast(a, pa.string()) for a in ids])
        shard_of, off_of = np.concatenate(shard_of), np.concatenate(off_of)
        if p.save_embeddings_path:
            _save_embeddings(p.save_embeddings_path, id_arr, x)
        scratch = Path(ctx.scratch_dir) / f"semantic-{self.position}"
        scratch.mkdir(parents=True, exist_ok=True)
        valid = np.flatnonzero(np.any(x != 0, axis=1))  # an empty text (zero vector) never matches
        k = p.num_clusters or (1 if valid.size <= p.exact_max_rows else math.ceil(valid.size / p.rows_per_cluster))
        labels = S.kmeans(x[valid], k, p.seed, p.kmeans_iterations, p.kmeans_sample)
        k = int(labels.max()) + 1 if labels.size else 0
        order = np.lexsort((valid, labels))
        members = valid[order]
        sizes = np.bincount(labels, minlength=k)
        offsets = np.zeros(k + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        emb_path, mem_path, off_path = (str(scratch / f) for f in ("emb.npy", "members.npy", "offsets.npy"))
        np.save(emb_path, x)
        np.save(mem_path, members)
        np.save(off_path, offsets)
        del x
        tasks = [(emb_path, mem_path, off_path, a, b, float(p.threshold), str(scratch / f"pairs-{a:07d}.npz"))
                 for a, b in S.task_ranges(sizes, max(1, min(k, 64)))]
        gone, kept, sim, clus = [], [], [], []
        for path in ctx.map(S.dedup_clusters, tasks):
            with np.load(path) as z:
                gone.append(z["gone"]), kept.append(z["kept"]), sim.append(z["sim"]), clus.append(z["cluster"])
        gone, kept, sim, clus = (np.concatenate(a) if a else np.empty(0, t) for a, t in (
            (gone, np.int64), (kept, np.int64), (sim, np.float32), (clus, np.int64)))
        o = np.argsort(gone, kind="stable")
        gone, kept, sim, clus = gone[o], kept[o], sim[o], clus[o]
        kept_ids = id_arr.take(pa.array(kept))
        sims = np.round(sim.astype(np.float64), 6)
        for s in np.unique(shard_of[gone]).tolist():
            sel = np.flatnonzero(shard_of[gone] == s)
            ctx.remove(s, off_of[gone[sel]], REASON, {"kept_id": kept_ids.take(pa.array(sel)),
                                                      "similarity": pa.array(sims[sel], pa.float64())})
        out_dir = Path(getattr(ctx, "output_dir", None) or ctx.scratch_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = out_dir / (PAIRS_FILE + ".tmp")
        pq.write_table(pa.table([id_arr.take(pa.array(gone)), kept_ids, pa.array(sims, pa.float64()),
                                 pa.array(clus)], schema=PAIRS_SCHEMA), tmp)
        tmp.replace(out_dir / PAIRS_FILE)
        self.last_stats = {"rows": n, "removed": int(gone.size), "clusters": k, "embedded_rows": int(valid.size)}
        return None


def _save_embeddings(path: str, ids: pa.Array, x: np.ndarray) -> None:
    """``path``: Parquet of (id, embedding) in dataset order, written to a temp name and renamed."""
    import os
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    emb = pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), x.shape[1])
    tmp = f"{path}.tmp-{os.getpid()}"
    pq.write_table(pa.table({"id": ids, "embedding": emb}), tmp)
    os.replace(tmp, path)
