"""video_remove_watermark_mapper on videos of real photos with a white box drawn in a corner of every frame:
the mask covers the box (and nothing outside the region), the box is inpainted away in every frame of the new
file, the rest of each frame stays as it was up to re-encoding; per-sample regions (roi_key); bad params."""
from pathlib import Path

import numpy as np
import pytest

from gristmill.registry import create_op

MEDIA = Path(__file__).resolve().parents[1] / "data" / "media"
av = pytest.importorskip("av")
pytest.importorskip("cv2")
NAMES = ["astronaut.jpg", "chelsea.png", "garden.jpg", "ladybird.jpg", "aqua.jpg", "storm.jpg"]


def _video(path, box):
    from PIL import Image, ImageDraw
    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4", rate=5)
        s.width, s.height, s.pix_fmt = 256, 256, "yuv420p"
        for n in NAMES * 2:
            im = Image.open(MEDIA / n).convert("RGB").resize((256, 256))
            ImageDraw.Draw(im).rectangle(list(box), fill="white")
            for p in s.encode(av.VideoFrame.from_ndarray(np.asarray(im), format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return str(path)


def _frames(path):
    with av.open(path) as c:
        return [f.to_ndarray(format="rgb24").astype(int) for f in c.decode(c.streams.video[0])]


@pytest.mark.parametrize("method", ["pixel_value", "pixel_diversity"])
def test_box_found_and_inpainted(tmp_path, method):
    v = _video(tmp_path / "wm.mp4", (4, 4, 20, 12))
    op = create_op("video_remove_watermark_mapper", {"save_dir": str(tmp_path / "out"), "detection_method": method})
    mask = op.mask(v, [(0, 0, 0.1, 0.1)])
    box = np.zeros((256, 256), bool)
    box[4:13, 4:21] = True
    assert mask[box].all() and not mask[30:, :].any() and not mask[:, 30:].any()  # the box, dilated, in the ROI
    out = op.apply([{"text": "x", "videos": [v]}])
    new = out[0]["videos"][0]
    assert new != v and out[0]["__meta__"]["source_file"] == [v]
    src, dst = _frames(v), _frames(new)
    assert len(src) == len(dst) == 12
    for a, b in zip(src, dst):
        assert a[box].mean() > 235 and b[box].mean() < 200  # white box gone
        assert np.abs(a - b)[30:, 30:].mean() < 6  # re-encoding (mpeg4 at its default bit rate)


def test_regions_per_sample_and_refusals(tmp_path):
    v = _video(tmp_path / "wm.mp4", (220, 230, 250, 250))
    op = create_op("video_remove_watermark_mapper", {"roi_key": "rois", "roi_type": "pixel",
                                                     "save_dir": str(tmp_path / "o")})
    out = op.apply([{"text": "x", "videos": [v], "rois": ["[200, 210, 256, 256]"]}])
    b = _frames(out[0]["videos"][0])[0]
    assert b[230:251, 220:251].mean() < 200
    with pytest.raises(Exception, match="roi_strings"):
        create_op("video_remove_watermark_mapper", {"roi_strings": ["1,2,3"]})
    with pytest.raises(Exception, match="frame_num must be greater than 1"):
        create_op("video_remove_watermark_mapper", {"detection_method": "pixel_diversity", "frame_num": 1})
