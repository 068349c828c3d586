"""media.frames' uniform sampling: Data-Juicer's exact arithmetic, shared by the frame-model ops and
video_remove_watermark_mapper (which had its own copy)."""
from fractions import Fraction

import numpy as np
import pytest

from gristmill.media.frames import group_targets, uniform_av_frames, uniform_frames, uniform_targets


@pytest.fixture(scope="module")
def second_at_30fps(tmp_path_factory):
    """30 frames at 30 fps (1 s), key frames every 10; frame i is a flat grey of level 8 * i."""
    import av
    path = str(tmp_path_factory.mktemp("v") / "count30.mp4")
    with av.open(path, "w") as c:
        s = c.add_stream("mpeg4", rate=30)
        s.width, s.height, s.pix_fmt, s.gop_size = 64, 48, "yuv420p", 10
        for i in range(30):
            for p in s.encode(av.VideoFrame.from_ndarray(np.full((48, 64, 3), 8 * i, np.uint8), format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def levels(images):
    return [int(round(np.asarray(im).mean() / 8)) for im in images]


def test_exact_hits_take_the_frame_on_the_target(second_at_30fps):
    # 11 targets 0, 0.1, ..., 1.0 s: 0.3 s is frame 9 exactly. In floats 0.1 * 3 = 0.30000000000000004 > 0.3,
    # so the former float rule skipped frame 9 for frame 10 (and 18 -> 19, 21 -> 22). Data-Juicer 1.6.1's
    # extract_video_frames_uniformly gives this list on this video (fractions of the time base).
    assert levels(uniform_frames(second_at_30fps, 11)) == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 29]
    assert levels(uniform_frames(second_at_30fps, 6)) == [0, 6, 12, 18, 24, 29]
    assert 0.1 * 3 > 0.3 and Fraction(1, 10) * 3 == Fraction(3, 10)


def test_watermark_op_uses_the_shared_sampling(second_at_30fps):
    from gristmill.ops.video import remove_watermark
    assert not hasattr(remove_watermark, "uniform_bgr")
    bgr = [f.to_ndarray(format="bgr24") for f in uniform_av_frames(second_at_30fps, 11)]
    assert [int(round(a.mean() / 8)) for a in bgr] == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 29]


def test_targets_grouped_by_key_frame():
    t = uniform_targets(Fraction(3), 7)  # 0, 0.5, ..., 3
    assert t == [Fraction(k, 2) for k in range(7)]
    assert uniform_targets(Fraction(3), 1) == [Fraction(3, 2)] and uniform_targets(Fraction(3), 0) == []
    assert group_targets(t, [0.0]) == [t]
    # key frames at 0, 1.0, 2.0: groups [0, 1), [1, 2), the rest; an empty group stays in place
    assert group_targets(t, [0.0, 1.0, 2.0]) == [t[:2], t[2:4], t[4:]]
    assert group_targets(t, [1.2, 1.4]) == [t[:3], [], t[3:]]
