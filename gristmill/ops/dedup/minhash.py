"""document_minhash_deduplicator: near-duplicate removal with MinHash-LSH, out of core.

Stages (the engine runs them): ``compute_hash`` is row-local and fused into the previous stage: it
shingles the text, computes the MinHash signature and stores only the LSH band keys (``num_bands`` ×
8 bytes per row) in a private column. ``resolve`` runs on the engine's workers (``_shuffle``): each shard's
scan writes its band keys into 64 hash partitions on disk, each partition is grouped by key on a worker
(one partition in memory there) and the rows that share a bucket are reduced to a forest of their local
clusters, which the driver merges in a union-find over global row numbers; every row but the first (in
dataset order) of each cluster is removed. With ``verify``, candidate pairs are checked by exact Jaccard similarity instead and
clustered without chaining (``_verify``). ``save_signatures_path`` / ``reference_signatures_path``:
incremental dedup against an earlier run's kept rows (``_reference``).
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Deduplicator, Params
from . import _resolve as R
from . import _shuffle as S
from ._kernels import MODES, minhash_signatures, shingle_arrays
from ._lsh import EDGE_DTYPE, band_keys, bucket_forest, optimal_param, permutations
from ._text import as_text, remove_pattern
from ._verify import verified_roots
from . import _reference as REF

EARLIER_REASON = "minhash duplicate of an earlier run"
# with verification, a bucket of up to this many rows yields all its pairs as candidates, so that two rows
# whose shared bucket starts with a row dissimilar to both are still compared
VERIFY_ALL_PAIRS_UPTO = 16

PRESETS: dict[str, dict] = {
    # datatrove's MinhashConfig defaults: 5-word shingles of simplified text, 14 bands x 8 rows, 64-bit
    "datatrove": {"tokenization": "whitespace", "simplify": True, "lowercase": True, "window_size": 5,
                  "num_bands": 14, "num_rows_per_band": 8, "num_permutations": 112},
    # NeMo Curator's fuzzy dedup defaults: 24-character shingles of the raw text, 20 bands x 13 rows
    "nemo": {"tokenization": "character", "simplify": False, "lowercase": False, "window_size": 24,
             "num_bands": 20, "num_rows_per_band": 13, "num_permutations": 260, "jaccard_threshold": 0.8},
}


@register("document_minhash_deduplicator")
class DocumentMinhashDeduplicator(Deduplicator):
    """Remove near-duplicate documents with MinHash-LSH (Data-Juicer's params). Rows that share an LSH
    bucket in any band are joined into clusters (transitively); the first row of each cluster in dataset
    order is kept. With ``verify`` a candidate pair only joins when the exact Jaccard similarity of its
    shingle sets reaches ``jaccard_threshold``. Rows whose text has no token never match anything."""

    version = 2  # 2: verify clusters as stars (no chaining)

    url_params = ("save_signatures_path", "reference_signatures_path")  # fs: written / read on object storage

    class Params(Params):
        tokenization: Literal["space", "punctuation", "character", "whitespace"] = Field(
            "space", description="How text is split into tokens: 'space' (on spaces, as Data-Juicer), "
                                 "'punctuation', 'character', or 'whitespace' (any whitespace run).")
        window_size: int = Field(5, ge=1, description="Tokens (characters) per shingle.")
        lowercase: bool = Field(True, description="Lowercase the text before shingling.")
        ignore_pattern: str | None = Field(None, description="Regex whose matches are removed before shingling.")
        simplify: bool = Field(False, description="datatrove's text simplification before shingling (lowercase, "
                                                  "numbers to 0, punctuation to spaces, whitespace, diacritics).")
        num_permutations: int = Field(256, ge=1, description="Number of MinHash permutations (signature length).")
        jaccard_threshold: float = Field(0.7, ge=0, le=1, description="Jaccard similarity regarded as duplicate; "
                                         "sets bands/rows when they are not given, and is the cut for `verify`.")
        num_bands: int | None = Field(None, ge=1, description="LSH bands (default: optimal for the threshold).")
        num_rows_per_band: int | None = Field(None, ge=1, description="Signature values per band.")
        preset: Literal["datatrove", "nemo"] | None = Field(
            None, description="Start from datatrove's (5-word shingles, 14x8) or NeMo Curator's (24-char "
                              "shingles, 20x13) configuration; explicitly given params still win.")
        verify: bool = Field(False, description="Check each candidate pair's exact Jaccard similarity of shingle "
                                                "sets against jaccard_threshold, and cluster without chaining: "
                                                "every removed row is that similar to the row kept for it.")
        seed: int = Field(42, description="Seed of the permutations.")
        save_signatures_path: str | None = trust.path_param(
            "write", None,
            description="Write the LSH band keys of the rows this op keeps to this Parquet file, for a later run's "
                        "reference_signatures_path (incremental dedup).")
        reference_signatures_path: str | list[str] | None = trust.path_param(
            "read", None,
            description="Signature file(s) of earlier runs (their save_signatures_path): rows that are "
                        "near-duplicates of an earlier run's kept rows are removed too, as if the earlier rows came "
                        "first in this dataset. Hashing params must match the earlier run's.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        if p.preset:
            update = {k: v for k, v in PRESETS[p.preset].items() if k not in p.model_fields_set}
            self.params = p = p.model_copy(update=update)
        if p.num_bands is None or p.num_rows_per_band is None:
            b, r = optimal_param(p.jaccard_threshold, p.num_permutations)
            self.params = p = p.model_copy(update={"num_bands": p.num_bands or b,
                                                   "num_rows_per_band": p.num_rows_per_band or r})
        if p.num_bands * p.num_rows_per_band > p.num_permutations:
            raise ValueError(f"num_bands x num_rows_per_band = {p.num_bands * p.num_rows_per_band} exceeds "
                             f"num_permutations = {p.num_permutations}")
        assert p.tokenization in MODES
        self._init_reference()

    def _init_reference(self) -> None:
        """Absolute signature paths (workers may run elsewhere); a reference made with other hashing
        params, or missing, is refused here, before any work."""
        p = self.params
        refs = p.reference_signatures_path
        refs = [refs] if isinstance(refs, str) else list(refs or [])
        self.references = [REF.absolute(r) for r in refs]  # a URL (s3://, gs://…) stays a URL
        self.save_path = REF.absolute(p.save_signatures_path) if p.save_signatures_path else None
        if self.save_path and REF.fs.is_url(self.save_path):  # its bucket answers, before any work
            REF.fs.check_access(self.save_path, f"{self.name}: save_signatures_path")
        if self.references and p.verify:
            raise ValueError(f"{self.name}: verify cannot be used with reference_signatures_path (a signature file "
                             f"holds band keys, not the shingles an exact Jaccard check needs)")
        if self.save_path in self.references:
            raise ValueError(f"{self.name}: save_signatures_path {p.save_signatures_path!r} is also a "
                             f"reference_signatures_path file; save to a new file")
        for r in self.references:
            REF.check_reference(r, self)

    def config(self) -> dict:
        """Params plus the size and mtime of each reference file (a changed reference reruns the resolve)."""
        c = super().config()
        if self.references:
            c["references"] = [REF.identity(r) for r in self.references]
        return c

    # -- row-local -------------------------------------------------------------------------------
    @property
    def column(self) -> str:
        return self.tmp_column("minhash")

    def _perm(self):
        k = self.params.num_bands * self.params.num_rows_per_band  # unused permutations change nothing
        return self.resource("perm", lambda: permutations(k, self.params.seed))

    def prepare_text(self, text) -> pa.Array:
        """The text as the kernel sees it: lowercased (also under ``simplify``), ignore_pattern removed."""
        p = self.params
        t = as_text(text)
        if p.lowercase or p.simplify:
            t = pc.utf8_lower(t)
        if p.ignore_pattern:
            t = remove_pattern(t, p.ignore_pattern)
        return t

    def shingle(self, text) -> tuple[np.ndarray, np.ndarray]:
        """(row, shingle hash) of every shingle of a text array, after this op's normalisation."""
        p = self.params
        return shingle_arrays(self.prepare_text(text), p.tokenization, p.window_size, p.simplify)

    def compute_hash(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        a, b = self._perm()
        sig, has = minhash_signatures(self.prepare_text(self.text(batch)), p.tokenization, p.window_size,
                                      p.simplify, a, b)
        keys = band_keys(sig, p.num_bands, p.num_rows_per_band)
        col = pa.FixedSizeListArray.from_arrays(pa.array(keys.ravel(), pa.uint64()), p.num_bands,
                                                mask=pa.array(~has))
        return C.set_column(batch, self.column, col)

    # -- global ----------------------------------------------------------------------------------
    def resolve_columns(self) -> list[str]:
        return [C.ID, self.column] + ([self.text_key] if self.params.verify else [])

    def spill_columns(self) -> list[str]:
        return [self.column]

    def spill_records(self, batch: pa.RecordBatch, row0: int) -> np.ndarray:
        """(band key, row) for every band of every row with a signature; rows numbered from ``row0``."""
        nb = self.params.num_bands
        col = batch.column(self.column)
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        m = batch.num_rows
        keys = col.values.slice(col.offset * nb, m * nb).to_numpy(zero_copy_only=False).reshape(m, nb)
        valid = np.flatnonzero(~col.is_null().to_numpy(zero_copy_only=False))
        rec = np.empty(valid.size * nb, EDGE_DTYPE)
        rec["key"] = keys[valid].ravel()
        rec["g"] = np.repeat(row0 + valid, nb)
        return rec

    def resolve(self, ctx):
        pieces, n_ref = REF.reference_sources(self.references)
        shuffle, n = S.scatter(ctx, self, f"minhash-{self.position}", EDGE_DTYPE, (pieces, REF.spill_reference))
        n -= n_ref
        earlier = None
        default_keep = type(self).keep_rule is DocumentMinhashDeduplicator.keep_rule
        if self.params.verify:  # over the driver's memory budget (default keep rule), roots on disk
            roots = verified_roots(self, ctx, shuffle, n, VERIFY_ALL_PAIRS_UPTO, bounded=default_keep)
        else:
            out = str(ctx.scratch_dir / f"minhash-forest-{self.position}")
            forests = S.map_partitions(ctx, bucket_forest, shuffle, out, n_ref)
            # over the driver's memory budget, roots on disk (_extcc); the keep rule takes either
            if n_ref:
                roots, earlier = REF.merge_bounded(forests, n_ref, n, ctx.scratch_dir / f"minhash-cc-{self.position}",
                                                   self.references, EARLIER_REASON)
            else:
                roots = S.merge_forests(forests, n, ctx.scratch_dir / f"minhash-cc-{self.position}")
            roots = self.keep_rule(ctx, np.asarray(roots, np.int64) if isinstance(roots, np.ndarray) else roots, n)
        self.last_stats = R.emit(ctx, roots, "minhash duplicate", earlier)
        if self.save_path:
            if isinstance(earlier, R.Earlier):  # a row kept out by a reference row is not its own root
                keep = R.kept_mask(roots, earlier.base)
            else:
                keep = R.kept_mask(roots)
                if earlier is not None:
                    keep &= earlier[0] < 0
            self.last_stats.update(REF.save_kept(ctx, self, keep, self.save_path))

    def keep_rule(self, ctx, roots, n: int):
        """The cluster roots as kept: by default each cluster's first row (a subclass may move them).
        ``roots``: an array, or past the driver's memory budget an ``_extcc.ExternalRoots``."""
        return roots
