"""Frame sampling (Data-Juicer's uniform / key-frame rules) and video_ocr_area_ratio_filter with RapidOCR's
bundled detector, checked against an independent computation on the same frames."""
import numpy as np
import pytest

from gristmill.media.frames import key_frames, uniform_frames
from mm_models_util import apply, text_frame, write_video


@pytest.fixture(scope="module")
def counter_video(tmp_path_factory):
    """30 frames at 10 fps; frame i is a flat grey of level 8 * i (readable back after compression)."""
    frames = [np.full((48, 64, 3), 8 * i, np.uint8) for i in range(30)]
    return write_video(tmp_path_factory.mktemp("v") / "counter.mp4", frames, fps=10, gop=10)


def levels(images):
    return [int(round(np.asarray(im).mean() / 8)) for im in images]


@pytest.mark.parametrize("n,want", [(1, [15]), (2, [0, 29]), (3, [0, 15, 29]), (4, [0, 10, 20, 29]),
                                    (100, [0, *range(2, 30), 29])])
def test_uniform_frames_pick_data_juicers_frames(counter_video, n, want):
    # duration 3.0 s; targets 0, d/(n-1), ..., d (n capped at 30 frames): the next frame at or after each,
    # the last frame for a target past the end. Expected lists recorded from Data-Juicer 1.6.1's
    # extract_video_frames_uniformly on this very video.
    assert levels(uniform_frames(counter_video, n)) == want


def test_key_frames_are_the_gop_starts(counter_video):
    assert levels(key_frames(counter_video)) == [0, 10, 20]


def test_unreadable_video_raises_clearly(tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 100)
    with pytest.raises(ValueError, match="cannot open video"):
        uniform_frames(str(bad), 3)
    with pytest.raises(FileNotFoundError):
        uniform_frames(str(tmp_path / "missing.mp4"), 3)


def shoelace(poly):
    x, y = np.asarray(poly, float).T
    return abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2


@pytest.fixture(scope="module")
def ocr_videos(tmp_path_factory):
    d = tmp_path_factory.mktemp("ocr")
    blank = [np.full((120, 320, 3), 255, np.uint8)] * 20
    words = [text_frame("Hello 2026 OCR")] * 10 + [text_frame("BIG", size=60)] * 10
    return write_video(d / "blank.mp4", blank), write_video(d / "words.mp4", words)


def test_ocr_area_ratio_equals_detector_boxes_over_frame_area(ocr_videos):
    from rapidocr_onnxruntime import RapidOCR
    blank, words = ocr_videos
    rows = [{"text": "", "videos": [words]}, {"text": "", "videos": [blank]}, {"text": "", "videos": []},
            {"text": "", "videos": [blank, words]}]
    kept, removed, rej = apply("video_ocr_area_ratio_filter", rows, min_area_ratio=0.01, frame_sample_num=2)
    assert not rej
    det = RapidOCR()
    want = []
    for im in uniform_frames(words, 2):
        boxes, _ = det(np.ascontiguousarray(np.asarray(im)[:, :, ::-1]), use_det=True, use_cls=False, use_rec=False)
        want.append(sum(shoelace(b) for b in boxes) / (im.width * im.height))
    ratio = float(np.mean(want))
    assert 0.02 < ratio < 0.5
    stats = {i: r["__stats__"]["video_ocr_area_ratio"] for i, r in enumerate(kept + removed)}
    got = {tuple(r["videos"]): r["__stats__"]["video_ocr_area_ratio"] for r in kept + removed}
    assert got[(words,)] == pytest.approx([ratio], abs=1e-9)
    assert got[(blank,)] == [0.0]
    assert got[(blank, words)] == pytest.approx([0.0, ratio], abs=1e-9)
    assert [r["videos"] for r in kept] == [[words], [], [blank, words]]  # any: one video with text suffices
    assert removed[0]["__reason__"] == "video_ocr_area_ratio < 0.01" and len(stats) == 4
    kept, removed, _ = apply("video_ocr_area_ratio_filter", rows, min_area_ratio=0.01, any_or_all="all",
                             frame_sample_num=2)
    assert [r["videos"] for r in kept] == [[words], []]


def test_ocr_rejects_a_corrupt_video_only(ocr_videos, tmp_path):
    bad = tmp_path / "trunc.mp4"
    bad.write_bytes(open(ocr_videos[1], "rb").read()[:300])
    rows = [{"text": "", "videos": [ocr_videos[0]]}, {"text": "", "videos": [str(bad)]}]
    kept, _, rej = apply("video_ocr_area_ratio_filter", rows)
    assert len(kept) == 1 and len(rej) == 1 and rej[0].error_type == "ValueError"
