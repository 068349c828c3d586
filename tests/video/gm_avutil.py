"""Helpers shared by the video-op tests: the bundled media (tests/data/av, see its README) and one op
applied to rows through FusedOp, as the engine applies it."""
from pathlib import Path

import pyarrow as pa

from gristmill.core.fused import FusedOp
from gristmill.registry import create_op

AV = Path(__file__).resolve().parents[1] / "data" / "av"
BARS = str(AV / "bars_320x240_2s.mp4")        # 2 s, 320x240, 10 fps, still
TESTSRC = str(AV / "testsrc_160x90_3s.mp4")   # 3 s, 160x90, moving, with an AAC audio track
PORTRAIT = str(AV / "portrait_90x160.mkv")   # 1.5 s, 90x160, MPEG-4 in Matroska (no stream duration)
SCENES = str(AV / "scenes_3x1.5s.mp4")       # 4.5 s, 128x96, three 1.5 s scenes, key frame at each cut
TRUNCATED = str(AV / "truncated.mp4")
RANDOM = str(AV / "random_bytes.mp4")


def run(name, rows, **params):
    """(kept rows, removed rows, rejects) of one op on rows."""
    batch = pa.RecordBatch.from_pylist(rows)
    res = FusedOp([create_op(name, params)]).run_batch(batch)
    removed = res.removed[0].to_pylist() if res.removed[0] is not None else []
    return res.batch.to_pylist(), removed, res.rejects
