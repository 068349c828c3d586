"""Helpers for the image tests: the bundled media (tests/data/media, see LICENSES.md there) and a runner
that applies ops through the fused executor, as the engine does."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from gristmill.core import columns as C
from gristmill.core.fused import FusedOp
from gristmill.media.image import clear_cache
from gristmill.registry import create_op

MEDIA = Path(__file__).resolve().parent.parent / "data" / "media"
# (file, width, height, bytes) of the bundled images
SIZES = {"astronaut.jpg": (256, 256), "chelsea.png": (180, 120), "aqua.jpg": (192, 120),
         "garden.jpg": (192, 120), "ladybird.jpg": (160, 120), "storm.jpg": (200, 125),
         "wood_tall.jpg": (60, 200), "spring.png": (96, 60), "wood.webp": (160, 90), "tiny.jpg": (24, 16),
         "garden_small.jpg": (150, 94)}
NAMES = list(SIZES)


def path(name: str) -> str:
    return str(MEDIA / name)


def sample_rows() -> list[dict]:
    """One row per bundled image (ids r0..r10 in NAMES order), a two-image row and a row without images:
    the rows bench/_dj_image_runner.py ran Data-Juicer 1.6.1 on for the expected values in the tests."""
    rows = [{"id": f"r{i}", "text": f"<__dj__image> {n}", "images": [path(n)]} for i, n in enumerate(NAMES)]
    rows.append({"id": "multi", "text": "two", "images": [path("wood_tall.jpg"), path("aqua.jpg")]})
    rows.append({"id": "none", "text": "no image", "images": []})
    return rows


def run(ops: list[tuple[str, dict]], rows: list[dict]):
    """(kept rows, removed rows per op, rejects) of a chain of row-local ops on one batch."""
    clear_cache()
    batch = C.from_records(rows)
    res = FusedOp([create_op(n, p) for n, p in ops]).run_batch(batch)
    removed = [[] if g is None else g.to_pylist() for g in res.removed]
    return res.batch.to_pylist(), removed, res.rejects


def ids(rows) -> list[str]:
    return [r["id"] for r in rows]


def binary_rows(names: list[str]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"id": n, "text": "", "images": [(MEDIA / n).read_bytes()]} for n in names],
        schema=pa.schema([("id", pa.string()), ("text", pa.string()), ("images", pa.list_(pa.binary()))]))
