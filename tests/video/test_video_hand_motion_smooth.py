"""video_hand_motion_smooth_mapper against Data-Juicer 1.6.1: hand trajectories built here (bench/
dj_media_rule_ops.py's ``hand_tracks``: noisy paths with jumps, rotations near ±pi, 21 joints, short and empty
hands); ``data/hand_smooth_dj161.json`` holds the states and actions DJ's op wrote for them. Plus the outlier
rule on a path with one jump, checked by hand."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy")
sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
from dj_media_rule_ops import hand_tracks  # noqa: E402

from gristmill.core import columns as C  # noqa: E402
from gristmill.ops.video.hand_motion_smooth import replace_outliers  # noqa: E402
from gristmill.registry import create_op  # noqa: E402

DJ = json.loads((Path(__file__).parent / "data" / "hand_smooth_dj161.json").read_text())["dj_states_actions"]


def test_same_states_and_actions_as_data_juicer():
    rows = hand_tracks()
    out = create_op("video_hand_motion_smooth_mapper", {}).apply(C.from_records([{"text": "", "__meta__": m}
                                                                                 for m in rows]))
    got = [r["__meta__"].get("hand_action_tags") for r in C.to_pylist(out)]
    assert len(got) == len(DJ)
    for g, want, row in zip(got, DJ, rows):
        assert len(g or []) == len(want)
        for gc, wc, rc in zip(g or [], want, row.get("hand_action_tags") or []):
            for hand, w in wc.items():
                for k in ("states", "actions"):
                    if w.get(k):
                        np.testing.assert_allclose(gc[hand][k], w[k], rtol=0, atol=1e-9)
                assert gc[hand]["valid_frame_ids"] == w.get("valid_frame_ids")
                if len(w.get("states") or []) >= 5:  # smoothed: joints too, one per frame
                    assert np.asarray(gc[hand]["joints_world"]).shape == np.asarray(rc[hand]["joints_world"]).shape
                    assert gc[hand]["joints_world"] != rc[hand]["joints_world"]
    assert got[3] is None and got[2] == []  # no hand actions: nothing written


def test_one_jump_is_interpolated():
    pos = np.zeros((8, 3))
    pos[:, 0] = np.cumsum([0, 1, 1.1, 0.9, 1.05, 0.95, 1.0, 1.1])
    pos[4, 1] = 5.0  # frame 4 jumps away and back: the jumps into frames 4 and 5 are outliers
    out = replace_outliers(pos, 5.0)
    third = (pos[6] - pos[3]) / 3
    np.testing.assert_allclose(out[4], pos[3] + third)  # Data-Juicer's rule: each jump's destination
    np.testing.assert_allclose(out[5], pos[3] + 2 * third)  # interpolated between the good neighbours
    assert (np.delete(out, [4, 5], 0) == np.delete(pos, [4, 5], 0)).all()
    assert (replace_outliers(pos[:3], 5.0) == pos[:3]).all()  # fewer than 4 frames: untouched
