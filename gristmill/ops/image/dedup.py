"""Image deduplication: ``image_deduplicator`` (Data-Juicer's: samples whose concatenated image hashes
are equal) and ``image_near_deduplicator`` (samples sharing an image whose hash is within a Hamming
distance of another's, bucketed so it scales).

Both hash each image as Data-Juicer does (``_hashing``: imagededup's pHash/dHash/aHash/wHash of the RGB
image), decoding through the shared per-chain cache. Resolution reuses the text deduplicators'
machinery: exact keys go through ``document_deduplicator``'s partitioned sort, near-duplicates through
``document_simhash_deduplicator``'s pigeonhole bucketing (a hash split into ``num_blocks`` bit blocks;
two hashes within distance k agree on at least ``num_blocks - k`` blocks, so each image is bucketed once
per choice of that many blocks and compared only inside buckets). Clusters keep their first row in
dataset order and are listed in ``clusters.parquet``.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...core import extras
from ...media import IMAGE_BYTES_KEY, IMAGE_KEY, media_values
from ...media.image import derived_get, derived_put, load_rgb
from ...registry import register
from ..dedup import _resolve as R
from ..dedup import _shuffle as S
from ..dedup._hashing import MASK, U64, fmix64
from ..dedup.exact import _KeyDedup
from ..dedup.simhash import SIM_DTYPE, DocumentSimhashDeduplicator, _close_forest
from ..base import Params
from ._common import flatten
from ._hashing import hash_many, hex16

Method = Literal["phash", "dhash", "whash", "ahash"]


METHOD_LIBRARIES = {"phash": ("scipy",), "whash": ("pywt",)}  # the hash transforms' libraries (_hashing.bits_of)


def _missing_libraries(self) -> list[str]:
    """Pillow, and the library of the hash ``method`` (scipy's DCT for phash, PyWavelets for whash)."""
    return extras.missing(self.requires + METHOD_LIBRARIES.get(self.params.method, ()))


def image_hashes(values: list, method: str) -> np.ndarray:
    """uint64 hash of every image (decoded once per chain, converted to RGB as Data-Juicer does; the
    images are decoded one after another, and the hash transforms run once over the whole batch). Hashes
are cached beside the decoded images: exact then near dedup in one chain hash each image once."""
    out = np.empty(len(values), np.uint64)
    todo = []
    for i, v in enumerate(values):
        h = derived_get(method, v)
        if h is None:
            todo.append(i)
        else:
            out[i] = h
    if todo:
        out[todo] = hash_many((load_rgb(values[i]) for i in todo), method)
        for i in todo:
            derived_put(method, values[i], out[i])
    return out


@register("image_deduplicator")
class ImageDeduplicator(_KeyDedup):
    """Remove samples whose images hash (``method``) exactly like an earlier sample's images, in order;
    with ``consider_text`` the (stripped) text must match too. Samples without images are never
    duplicates (with ``consider_text`` they are compared by text alone, as in Data-Juicer)."""

    requires = ("PIL",)
    missing_libraries = _missing_libraries
    reason_text = "duplicate images"

    class Params(Params):
        image_key: str = Field(IMAGE_KEY, description="Field holding each sample's list of images.")
        image_bytes_key: str = Field(IMAGE_BYTES_KEY, description="Field holding image bytes parallel to "
                                     "image_key, decoded instead of the path where present.")
        method: Method = Field("phash", description="Image hash: phash, dhash, whash or ahash.")
        consider_text: bool = Field(False, description="Samples must also have the same text to be duplicates.")

    def key_array(self, batch):
        items = media_values(batch, self.params.image_key, self.params.image_bytes_key)
        flat, offsets = flatten(items)
        hx = [hex16(int(h)) for h in image_hashes(flat, self.params.method)]
        keys = ["".join(hx[offsets[r]:offsets[r + 1]]) for r in range(batch.num_rows)]
        if self.params.consider_text:
            text = pc.utf8_trim_whitespace(self.text(batch)).to_pylist()
            return pa.array([f"{k}\x00{t if t is not None else ''}" for k, t in zip(keys, text)], pa.string())
        return pa.array([k or None for k in keys], pa.string())


@register("image_near_deduplicator")
class ImageNearDeduplicator(DocumentSimhashDeduplicator):
    """Remove samples with an image whose 64-bit perceptual hash (``method``) is within
    ``hamming_distance`` bits of an image of an earlier sample (clusters are transitive; the first
    sample of each is kept). Images are bucketed by ``num_blocks`` bit blocks (LSH), so the work grows
    with the number of images, not its square."""

    requires = ("PIL",)
    missing_libraries = _missing_libraries

    class Params(Params):
        image_key: str = Field(IMAGE_KEY, description="Field holding each sample's list of images.")
        image_bytes_key: str = Field(IMAGE_BYTES_KEY, description="Field holding image bytes parallel to "
                                     "image_key, decoded instead of the path where present.")
        method: Method = Field("phash", description="Image hash: phash, dhash, whash or ahash.")
        hamming_distance: int = Field(6, ge=0, le=63, description="Max differing bits of near-duplicates.")
        num_blocks: int = Field(8, ge=1, le=64, description="Bit blocks a hash is split into for bucketing "
                                                             "(more than hamming_distance).")

    @property
    def column(self) -> str:
        return self.tmp_column("imagehash")

    def compute_hash(self, batch):
        flat, offsets = flatten(media_values(batch, self.params.image_key, self.params.image_bytes_key))
        h = image_hashes(flat, self.params.method)
        arr = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(h, pa.uint64()))
        return C.set_column(batch, self.column, arr)

    def spill_records(self, batch, row0):
        """(bucket key, row, hash) of every image, once per choice of blocks."""
        col = batch.column(self.column)
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        lens = pc.fill_null(pc.list_value_length(col), 0).to_numpy(zero_copy_only=False)
        rows = np.repeat(np.arange(batch.num_rows), lens)
        h = pc.list_flatten(col).to_numpy(zero_copy_only=False).astype(U64)
        recs = []
        for ci, m in enumerate(self._combos()):
            rec = np.empty(h.size, SIM_DTYPE)
            rec["key"] = fmix64((h & m) ^ U64(((ci + 1) * 0x9E3779B97F4A7C15) & MASK))
            rec["g"] = row0 + rows
            rec["h"] = h
            recs.append(rec)
        return np.concatenate(recs) if recs else np.empty(0, SIM_DTYPE)

    def resolve(self, ctx):
        shuffle, n = S.scatter(ctx, self, f"imagehash-{self.position}", SIM_DTYPE)
        out = str(ctx.scratch_dir / f"imagehash-forest-{self.position}")
        paths = S.map_partitions(ctx, _close_forest, shuffle, out, self.params.hamming_distance)
        roots = S.merge_forests(paths, n, ctx.scratch_dir / f"imagehash-cc-{self.position}")  # over the budget: on disk
        self.last_stats = R.emit(ctx, roots, "near-duplicate image")
