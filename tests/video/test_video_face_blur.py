"""video_face_blur_mapper on videos built here from real photos (the astronaut's face in some frames, the cat in
the others): the face box OpenCV's cascade finds in a frame is blurred in the new file (its detail drops, the
rest of the frame stays as it was up to re-encoding), frame count, rate, size and codec are kept, a video with
no face stays as it is, and the original goes to meta.source_file."""
from pathlib import Path

import numpy as np
import pytest

from gristmill.registry import create_op

MEDIA = Path(__file__).resolve().parents[1] / "data" / "media"
av = pytest.importorskip("av")
cv2 = pytest.importorskip("cv2")


def _video(path, pattern, size=256):
    from PIL import Image
    face = np.asarray(Image.open(MEDIA / "astronaut.jpg").convert("RGB").resize((size, size)))
    cat = np.asarray(Image.open(MEDIA / "chelsea.png").convert("RGB").resize((size, size)))
    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4", rate=5)
        s.width, s.height, s.pix_fmt = size, size, "yuv420p"
        for ch in pattern:
            for p in s.encode(av.VideoFrame.from_ndarray(face if ch == "F" else cat, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return str(path)


def _frames(path):
    with av.open(path) as c:
        s = c.streams.video[0]
        return [f.to_ndarray(format="rgb24") for f in c.decode(s)], (s.codec_context.name, s.average_rate)


def _detail(a):
    return float(cv2.Laplacian(cv2.cvtColor(a, cv2.COLOR_RGB2GRAY), cv2.CV_64F).var())


def test_faces_blurred_frame_by_frame(tmp_path):
    faces, cat = _video(tmp_path / "faces.mp4", "FFCF"), _video(tmp_path / "cat.mp4", "CC")
    op = create_op("video_face_blur_mapper", {"save_dir": str(tmp_path / "out"), "radius": 4})
    out = op.apply([{"text": "a", "videos": [faces, cat, faces]}, {"text": "b", "videos": []}])
    new = out[0]["videos"][0]
    assert out[0]["videos"] == [new, cat, new] and new.startswith(str(tmp_path / "out"))
    assert out[0]["__meta__"]["source_file"] == [faces, cat, faces]
    src, src_info = _frames(faces)
    dst, dst_info = _frames(new)
    assert len(dst) == len(src) == 4 and src_info == dst_info and dst[0].shape == src[0].shape
    cascade = op.detector()
    for i, (a, b) in enumerate(zip(src, dst)):
        boxes = cascade.detectMultiScale(cv2.cvtColor(a, cv2.COLOR_RGB2GRAY), scaleFactor=1.1, minNeighbors=3)
        assert (len(boxes) > 0) == (i != 2)  # the astronaut's face in frames 0, 1, 3; none in the cat's
        mask = np.zeros(a.shape[:2], bool)
        for x, y, w, h in boxes:
            mask[y:y + h, x:x + w] = True
            assert _detail(b[y:y + h, x:x + w]) < 0.5 * _detail(a[y:y + h, x:x + w])
        diff = np.abs(a.astype(int) - b.astype(int)).mean(axis=2)
        assert diff[~mask].mean() < 3  # outside the faces: the same picture, up to re-encoding
    assert op.apply([{"text": "c", "videos": [cat]}])[0]["videos"] == [cat]  # no face anywhere: left as it is


def test_bad_blur_type_refused():
    with pytest.raises(Exception, match="blur_type"):
        create_op("video_face_blur_mapper", {"blur_type": "median"})
