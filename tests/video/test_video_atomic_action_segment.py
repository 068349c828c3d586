"""video_atomic_action_segment_mapper against Data-Juicer 1.6.1: the trajectories of bench/dj_media_rule_ops.py
(``segment_tracks``: noisy hand paths of 4-400 frames, jumps, short and empty hands); ``data/
atomic_segments_dj161.json`` holds DJ's segments (hand, id, first and last frame, length) per param set.
Plus the cutting rules on a speed profile made by hand."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy")
sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
from dj_media_rule_ops import segment_tracks  # noqa: E402

from gristmill.core import columns as C  # noqa: E402
from gristmill.ops.video.atomic_action_segment import local_minima  # noqa: E402
from gristmill.registry import create_op  # noqa: E402

DJ = json.loads((Path(__file__).parent / "data" / "atomic_segments_dj161.json").read_text())


@pytest.mark.parametrize("params", list(DJ))
def test_same_segments_as_data_juicer(params):
    rows = segment_tracks()
    out = create_op("video_atomic_action_segment_mapper", json.loads(params)).apply(
        C.from_records([{"text": "", "__meta__": m} for m in rows]))
    got = [r["__meta__"].get("atomic_action_segments") for r in C.to_pylist(out)]
    short = [None if g is None else [[s["hand_type"], s["segment_id"], s["start_frame"], s["end_frame"],
                                      len(s["states"])] for s in g] for g in got]
    assert short == DJ[params]
    for g, row in zip(got, rows):  # each segment is a slice of its hand's data
        for s in g or []:
            hands = [c[s["hand_type"]] for c in row["hand_action_tags"] if c.get(s["hand_type"])]
            assert any(h["states"][h["valid_frame_ids"].index(s["start_frame"]):][:len(s["states"])] == s["states"]
                       for h in hands)


def test_minima_within_the_window():
    speed = np.array([0, 5, 4, 3, 4, 5, 6, 2, 6, 7, 1, 7], float)
    assert local_minima(speed, 1) == [3, 7, 10]
    assert local_minima(speed, 2) == [3, 7, 10]
    assert local_minima(speed, 3) == [10]  # frame 3 sees frame 0 (0), frame 7 sees frame 10 (1)
    assert local_minima(speed[:3], 5) == [] and local_minima(np.array([3.0, 1.0, 3.0]), 5) == [1]
