"""video_human_tracks_extraction_mapper, video_human_tracks_face_demographic_mapper and
video_active_speaker_detect_mapper on lossless synthetic videos (blue 'people' with red 'faces') with TorchScript
exports at the documented interfaces: tracks, person boxes, people counts, track files; attributes (median,
most frequent share); active speakers from the audio under each track; MFCCs as python_speech_features."""
import pickle

import numpy as np
import pytest

from gristmill.registry import create_op

torch = pytest.importorskip("torch")
pytest.importorskip("cv2")
pytest.importorskip("av")

from human_models_util import (FaceAttributes, LoudnessASD, face_detector, person_detector,  # noqa: E402
                               person_frames, save_script, write_video)


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    d = tmp_path_factory.mktemp("human")
    t = np.arange(16000 * 2) / 16000  # 2 s: a loud tone for the first second, then silence
    audio = np.where(t < 1.0, 0.5 * np.sin(2 * np.pi * 440 * t), 0.0)
    return {"dir": d, "one": write_video(d / "one.mov", person_frames(50), audio=audio),
            "two": write_video(d / "two.mov", person_frames(30, w=160, people=((10, 1), (90, 1)))),
            "short": write_video(d / "short.mov", person_frames(8)),
            "faces": face_detector(d), "people": person_detector(d),
            "attrs": save_script(FaceAttributes(), d / "attrs.ts"), "asd": save_script(LoudnessASD(), d / "asd.ts")}


def extract(media, tmp_path, videos_rows):
    op = create_op("video_human_tracks_extraction_mapper", {
        "face_track_bbox_path": str(tmp_path / "tracks"), "YOLOv8_human_model_path": media["people"],
        "face_detect_S3FD_model_path": media["faces"], "device": "cpu"})
    return op.apply([{"videos": v} for v in videos_rows])


def test_tracks_boxes_and_people(media, tmp_path):
    out = extract(media, tmp_path, [[media["one"], media["two"]], [media["short"]], []])
    meta = [r["__meta__"] for r in out]
    assert meta[0]["number_people_in_video"] == [1, 2] and [len(v) for v in meta[0]["human_track_data_path"]] == [1, 2]
    assert meta[1] == {"human_track_data_path": [[]], "number_people_in_video": [0]}  # 8 frames: no track
    assert meta[2] == {"human_track_data_path": [], "number_people_in_video": []}
    with open(meta[0]["human_track_data_path"][0][0]["bbox_path"], "rb") as f:
        t = pickle.load(f)
    assert t["frame"] == list(range(50))
    x = [28 + i // 2 for i in range(50)]  # the face moves one pixel every other frame
    assert t["xy_bbox"] == [[float(a), 14.0, float(a + 14), 28.0] for a in x]
    assert t["xys_bbox"] == {"x": [a + 7.0 for a in x], "y": [21.0] * 50, "s": [7.0] * 50}
    # person boxes median-filtered over 5 frames, zero-padded at the ends (scipy's medfilt)
    px = np.pad(np.array([20.0 + i // 2 for i in range(50)]), 2)
    want = np.median(np.lib.stride_tricks.sliding_window_view(px, 5), axis=1)
    assert t["xy_human_bbox"]["x1"] == want.tolist()
    assert t["xy_human_bbox"]["y1"] == [10.0] * 48 + [10.0, 10.0]
    assert t["xy_human_bbox"]["y2"] == [60.0] * 50
    two = [pickle.load(open(p["bbox_path"], "rb")) for p in meta[0]["human_track_data_path"][1]]
    assert sorted(tr["xy_bbox"][0][0] for tr in two) == [18.0, 98.0]


def test_face_demographic(media, tmp_path):
    rows = extract(media, tmp_path, [[media["one"], media["short"]]])
    op = create_op("video_human_tracks_face_demographic_mapper", {
        "original_data_save_path": str(tmp_path / "demo"), "face_attribute_model": media["attrs"],
        "detect_interval": 5, "device": "cpu"})
    got = op.apply(rows)[0]["__meta__"]["video_facetrack_attribute_demographic"]
    assert len(got) == 2 and got[1] == []
    rec = got[0][0]
    with open(rec["face_attribute_path"], "rb") as f:
        per_frame = pickle.load(f)
    assert sorted(per_frame) == list(range(0, 50, 5))  # every detect_interval-th frame of the 50-frame track
    ages = sorted(v[0]["age"] for v in per_frame.values())
    assert rec["age"] == (ages[4] + ages[5]) / 2 and 0 < rec["age"] < 100
    # the crop (context 0.5) is 196 red face pixels of 441, the rest blue body: 'Man' by the export's rule
    assert rec["gender"] == ["Man", "1.0"] and rec["race"] == ["asian", "1.0"]
    assert ages[0] == ages[-1] == int(100 * 196 / 441)
    assert set(per_frame[0][0]) == {"age", "gender", "dominant_gender", "race", "dominant_race"}
    with pytest.raises(Exception, match="face_attribute_model is required"):
        create_op("video_human_tracks_face_demographic_mapper", {})
    with pytest.raises(Exception, match="after video_human_tracks_extraction_mapper"):
        op.apply([{"videos": [media["one"]]}])


def test_active_speaker(media, tmp_path):
    rows = extract(media, tmp_path, [[media["one"]], [media["one"]], [media["one"]], []])
    rows[0]["__meta__"]["video_audio_tags"] = ["Speech"]
    rows[1]["__meta__"]["video_audio_tags"] = ["Music"]
    op = create_op("video_active_speaker_detect_mapper", {"Light_ASD_model_path": media["asd"], "device": "cpu"})
    out = op.apply(rows)
    # 50 frames = 2 s at 25 fps; the loud first second gives 25 positive frames > 15
    assert [r["__meta__"].get("active_speaker_flag") for r in out] == [[[True]], [[False]], None, []]
    strict = create_op("video_active_speaker_detect_mapper", {"Light_ASD_model_path": media["asd"],
                                                              "active_threshold": 40, "device": "cpu"})
    assert strict.apply(rows[:1])[0]["__meta__"]["active_speaker_flag"] == [[False]]


def test_active_speaker_consistency_check(media):
    op = create_op("video_active_speaker_detect_mapper", {"Light_ASD_model_path": media["asd"]})
    man = {"Age": [40], "female": [0.05], "male": [0.9], "child": [0.01]}
    assert op.revise(20, "No.", man, ["Man", "0.9"]) is True
    assert op.revise(20, "No.", man, ["Woman", "0.9"]) is False  # confident voice and face disagree
    assert op.revise(20, "No.", man, ["Woman", "0.6"]) is True  # face not confident
    assert op.revise(20, "Yes, a child.", man, ["Man", "0.9"]) is False  # child look, adult voice
    assert op.revise(20, "yes", {"Age": [8], "female": [0.2], "male": [0.2], "child": [0.6]}, ["Man", "1.0"]) is True
    assert op.revise(20, "No", {"Age": [30], "female": [0.2], "male": [0.2], "child": [0.6]}, ["Man", "1.0"]) is True
    assert op.revise(10, "No", man, ["Man", "1.0"]) is False  # under the threshold


REFERENCE_MFCC = [[16.281748590662, 25.064949869877, 19.130850789052, 17.091087383892],
                  [16.342449078437, 25.411111971686, 19.533410685021, 17.44856083102],
                  [16.400808372595, 26.248786918909, 20.584862480947, 18.71577409285]]


def test_mfcc_matches_python_speech_features():
    from gristmill.ops.video.active_speaker import mfcc
    x = np.round(8000 * np.sin(np.arange(1200) * 0.05) * np.cos(np.arange(1200) * 0.011))
    # python_speech_features 0.6: mfcc(x, 16000, numcep=13, winlen=0.025, winstep=0.010)[[0, 3, 5]][:, :4]
    want = REFERENCE_MFCC
    np.testing.assert_allclose(mfcc(x)[[0, 3, 5]][:, :4], want, rtol=1e-9, atol=1e-9)


def test_refuses_checkpoints_it_cannot_run(tmp_path):
    ckpt = tmp_path / "sfd_face.pth"
    torch.save({"w": torch.zeros(2)}, ckpt)
    op = create_op("video_human_tracks_extraction_mapper", {"face_detect_S3FD_model_path": str(ckpt),
                                                            "face_track_bbox_path": str(tmp_path)})
    with pytest.raises(ValueError, match="neither an ONNX file"):
        op.resource("detectors", op._models)
    with pytest.raises(Exception, match="no model file"):
        create_op("video_active_speaker_detect_mapper", {})


def constant_onnx(path, box):
    """An ONNX detector whose output is one fixed box ``(1, 5)`` whatever the frame (input ``image (1, 3, H, W)``)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    out = helper.make_tensor("b", TensorProto.FLOAT, [1, 5], [float(x) for x in box])
    g = helper.make_graph([helper.make_node("Constant", [], ["boxes"], value=out)], "det",
                          [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, None, None])],
                          [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 5])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def test_onnx_exports(media, tmp_path):
    pytest.importorskip("onnxruntime")
    op = create_op("video_human_tracks_extraction_mapper", {
        "face_track_bbox_path": str(tmp_path / "tracks"), "device": "cpu",
        "face_detect_S3FD_model_path": constant_onnx(tmp_path / "f.onnx", [30, 12, 44, 26, 0.99]),
        "YOLOv8_human_model_path": constant_onnx(tmp_path / "p.onnx", [22, 8, 52, 62, 0.9])})
    assert op.missing_libraries() == []
    meta = op.apply([{"videos": [media["short"], media["one"]]}])[0]["__meta__"]
    assert meta["number_people_in_video"] == [0, 1]
    t = pickle.load(open(meta["human_track_data_path"][1][0]["bbox_path"], "rb"))
    assert t["xy_bbox"] == [[30.0, 12.0, 44.0, 26.0]] * 50 and t["xy_human_bbox"]["x1"][2:-2] == [22.0] * 46
    low = create_op("video_human_tracks_extraction_mapper", {  # scores of 0.9 or less are not faces (S3FD's 0.9)
        "face_track_bbox_path": str(tmp_path / "t2"),
        "face_detect_S3FD_model_path": constant_onnx(tmp_path / "f2.onnx", [30, 12, 44, 26, 0.9])})
    assert low.apply([{"videos": [media["one"]]}])[0]["__meta__"]["human_track_data_path"] == [[]]


def test_builtin_detectors_at_data_juicers_default_paths(media, tmp_path):
    from gristmill.ops.video._tracks import Detector
    op = create_op("video_human_tracks_extraction_mapper", {"face_track_bbox_path": str(tmp_path)})
    assert op.models() == [] and op.missing_libraries() == []  # OpenCV's Haar cascade and HOG detector
    face, person = Detector("face", None, "cpu"), Detector("person", None, "cpu")
    frame = np.zeros((128, 64, 3), np.uint8)
    assert face(frame).shape == (0, 5) and person(frame).shape[1:] == (5,)
    # colour squares are no faces to a Haar cascade: no track, nobody counted
    assert op.apply([{"videos": [media["one"]]}])[0]["__meta__"] == {"human_track_data_path": [[]],
                                                                     "number_people_in_video": [0]}
