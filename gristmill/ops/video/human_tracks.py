"""Data-Juicer 1.6.1's HumanVBench human-track ops (``_tracks`` holds the shared steps):

- ``video_human_tracks_extraction_mapper``: per video, faces detected in every frame (kept above score 0.9,
  S3FD's ``conf_th`` in Data-Juicer), chained into face tracks (IoU > 0.55 within 8 frames, more than 10
  frames, gaps interpolated; the whole video is one shot, as Data-Juicer's ``scene_detect`` returns it), each
  track's person box per frame (the person box containing the face, nearest its centre; missing and outlying
  coordinates filled, 5-wide median filter), tracks merged across cuts (``_tracks.merge_tracks``), the 5 longest
  over 15 frames kept. Each kept track is written to ``face_track_bbox_path`` as a pickle of
  ``{"frame", "xy_bbox", "xys_bbox": {x, y, s}, "xy_human_bbox": {x1, y1, x2, y2}}`` (plain lists; file
  ``<video stem>_<digest>_<i>.pkl``, the digest of the video's path added to Data-Juicer's ``<stem>_<i>.pkl`` so
  same-named videos never overwrite each other). ``meta.human_track_data_path`` gets per video the list of
  ``{"bbox_path"}``, ``meta.number_people_in_video`` per video the number of anchor tracks (people seen at
  once).

  Models. Data-Juicer clones Light-ASD's and YOLOv8-human's repositories and loads their checkpoints with that
  code (S3FD ``sfd_face.pth``, YOLOv8 ``best.pt``). gristmill runs no cloned code:
  ``face_detect_S3FD_model_path`` and ``YOLOv8_human_model_path`` name an **ONNX file or a TorchScript export**
  (a path, or a model-store name ``NAME.onnx`` / ``NAME.torchscript.pt``: ``gristmill models add NAME FILE``)
  with the interface ``forward(image: float32 (1, 3, H, W), RGB, 0..255) -> (N, 4|5)`` boxes
  ``x1, y1, x2, y2[, score]`` in frame pixels (export S3FD's ``detect_faces`` / YOLOv8's detection with its
  own resizing and NMS inside). Left at Data-Juicer's default path with no file there, the detectors that
  ship in OpenCV's wheel run instead: the frontal-face Haar cascade (``haarcascade_frontalface_alt.xml``,
  as the face ops) and the HOG people detector. A raw ``.pth`` / ``.pt`` checkpoint is refused with this
  advice. Data-Juicer's track merging adds DeepFace's Facenet distance between the touching faces;
  gristmill adds it when ``face_embedding_model`` (gristmill) names an export ``forward(faces: float32
  (N, 3, 160, 160) RGB 0..1) -> (N, D)`` (cosine distance), and merges on box overlap alone otherwise.

- ``video_human_tracks_face_demographic_mapper``: per track, faces cropped every ``detect_interval`` frames
  (every ``len // 15`` for tracks over 75 frames; Data-Juicer's crop around the box centre, context 0.5)
  and classified by ``face_attribute_model`` (gristmill; Data-Juicer runs DeepFace's Keras models, downloaded
  at run time): an ONNX or TorchScript export ``forward(faces: float32 (N, 3, 224, 224) RGB 0..1) ->
  (age (N,) in years, gender (N, 2) probabilities [Woman, Man], race (N, 6) probabilities [asian, indian,
  black, white, middle eastern, latino hispanic])`` (DeepFace's labels). Per frame DeepFace's record
  (``age`` as int, ``gender`` / ``race`` in percent, ``dominant_gender``, ``dominant_race``) goes to a pickle
  in ``original_data_save_path``; ``meta.video_facetrack_attribute_demographic`` gets per video, per track
  ``{"face_attribute_path", "age": median age, "gender": [most frequent, its share as a string],
  "race": [...]}``, Data-Juicer's layout (a tuple becomes a two-item list).

Both need cv2; the exports torch or onnxruntime. ``device: auto`` runs TorchScript on CUDA when there is one."""
from __future__ import annotations

import collections
import os

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...registry import register
from ..base import Mapper
from . import _tracks as T
from ._common import VideoParams, items_of

DJ_YOLO = "./thirdparty/humanvbench_models/YOLOv8_human/weights/best.pt"
DJ_S3FD = "./thirdparty/humanvbench_models/Light-ASD/model/faceDetector/s3fd/sfd_face.pth"
TRACKS = "human_track_data_path"
PEOPLE = "number_people_in_video"
DEMOGRAPHIC = "video_facetrack_attribute_demographic"
GENDERS = ("Woman", "Man")
RACES = ("asian", "indian", "black", "white", "middle eastern", "latino hispanic")
FACE_CONF = 0.9

TRACK_LIST = pa.list_(pa.list_(pa.struct([("bbox_path", pa.string())])))


def detector_file(ref: str | None, dj_default: str, param: str) -> str | None:
    """The export a detector param names; None (the OpenCV built-in) for an empty value or Data-Juicer's
    default path with no file there. FileNotFoundError for any other path that does not exist."""
    if not ref or (ref == dj_default and not os.path.isfile(ref)):
        return None
    T.check_model_file(ref, param)
    return ref


def require_tracks(op, meta_tracks) -> None:
    if meta_tracks is None:
        raise ValueError(f"{op.name} must be operated after video_human_tracks_extraction_mapper (no "
                         f"meta.{TRACKS} in this sample)")


def per_video_tracks(op, batch, fn) -> list[list[list]]:
    """Per row, per video: ``fn(video, frames, tracks)`` (the video's decoded frames and its entries of
    meta.human_track_data_path), ``[]`` for a video with no track; refuses a sample without that meta."""
    have = C.get_meta(batch, TRACKS)
    have = have.to_pylist() if have is not None else [None] * batch.num_rows
    out = []
    for r, videos in enumerate(items_of(op, batch)):
        require_tracks(op, have[r])
        out.append([fn(videos[vi], T.video_array(videos[vi]), tracks) if tracks else []
                    for vi, tracks in enumerate(have[r])])
    return out


class _Params(VideoParams):
    device: str = Field("auto", description="Device of the models: 'auto' (CUDA when a GPU is visible, else CPU), "
                                            "'cpu', 'cuda:1'... (ONNX exports: CUDA when onnxruntime has it) "
                                            "(gristmill).")


@register("video_human_tracks_extraction_mapper")
class VideoHumanTracksExtractionMapper(Mapper):
    """Face and person box tracks of each video (face detection, tracking, person boxes, merging), each written
    to a track file; ``meta.human_track_data_path`` lists them per video, ``meta.number_people_in_video``
    counts the people seen at once."""

    inputs = ("{video_key}?",)
    outputs = ("meta.{tag_field_name_human_track_path}", "meta.{tag_field_name_people_num}")
    requires = ("cv2",)
    resources = Resources(memory=4 * 2**30)
    version = 1

    class Params(_Params):
        face_track_bbox_path: str = trust.path_param("write", "./HumanVBenchRecipe/dj_human_track",
                                                     description="Directory the track files are written to.")
        YOLOv8_human_model_path: str = trust.path_param(
            "model", DJ_YOLO, description="Person detector: an ONNX file or TorchScript export (a path or a store "
                                          "name) with forward(image: float32 (1, 3, H, W) RGB 0..255) -> (N, 4|5) "
                                          "boxes x1, y1, x2, y2[, score] in pixels; Data-Juicer's default path with "
                                          "no file there: OpenCV's HOG people detector.")
        face_detect_S3FD_model_path: str = trust.path_param(
            "model", DJ_S3FD, description="Face detector: an ONNX file or TorchScript export (a path or a store "
                                          "name), the person detector's interface, boxes scoring above 0.9 kept; "
                                          "Data-Juicer's default path with no file there: OpenCV's frontal-face "
                                          "Haar cascade.")
        face_embedding_model: str | None = trust.path_param(
            "model", None, description="Face embedding export used when merging tracks (Data-Juicer: DeepFace's "
                                       "Facenet): forward(faces: float32 (N, 3, 160, 160) RGB 0..1) -> (N, D), "
                                       "cosine distance; none: merge on box overlap alone (gristmill).")
        tag_field_name_human_track_path: str = Field(TRACKS, description="Meta field of the track files.")
        tag_field_name_people_num: str = Field(PEOPLE, description="Meta field of the people counts.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self._face = detector_file(p.face_detect_S3FD_model_path, DJ_S3FD, "face_detect_S3FD_model_path")
        self._person = detector_file(p.YOLOv8_human_model_path, DJ_YOLO, "YOLOv8_human_model_path")
        self._emb = p.face_embedding_model or None
        if self._emb:
            T.check_model_file(self._emb, "face_embedding_model")
        trust.check_write(p.face_track_bbox_path, "face_track_bbox_path")

    def models(self) -> list[str]:
        return T.file_store_names(self._face, self._person, self._emb)

    def missing_libraries(self) -> list[str]:
        from ...core import extras
        files = [f for f in (self._face, self._person, self._emb) if f]
        mods = {"onnxruntime" if f.endswith(".onnx") else "torch" for f in files}
        return extras.missing(tuple(sorted(mods)))

    def _models(self):
        p = self.params
        emb = T.ExportModel(T.model_file(self._emb, "face_embedding_model"), p.device,
                            "forward(faces: (N, 3, 160, 160) RGB 0..1) -> (N, D)") if self._emb else None
        face = T.model_file(self._face, "face_detect_S3FD_model_path") if self._face else None
        person = T.model_file(self._person, "YOLOv8_human_model_path") if self._person else None
        return T.Detector("face", face, p.device), T.Detector("person", person, p.device), emb

    def tracks_of(self, video) -> tuple[int, list[dict]]:
        """(people count, kept tracks) of one video; each track as ``merge_tracks`` returns it."""
        import cv2
        face_det, person_det, emb = self.resource("detectors", self._models)
        frames = T.video_array(video)
        rgb = [cv2.cvtColor(f, cv2.COLOR_BGR2RGB) for f in frames]
        faces = []
        for i, im in enumerate(rgb):
            faces.append([{"frame": i, "bbox": b[:4].tolist()} for b in face_det(im) if b[4] > FACE_CONF])
        tracks = T.track_faces(faces) if len(frames) >= 10 else []
        humans: dict[int, np.ndarray] = {}

        def humans_at(i: int):
            if i not in humans:
                humans[i] = person_det(rgb[i])
            return humans[i]

        found = [t for t in (T.face_and_human_track(t, humans_at) for t in tracks) if t is not None]

        def distance(a, b):
            x = np.stack([cv2.resize(cv2.cvtColor(c, cv2.COLOR_BGR2RGB), (160, 160)) for c in (a, b)])
            e = emb(x.astype(np.float32).transpose(0, 3, 1, 2) / 255.0)[0].reshape(2, -1)
            return float(1 - np.dot(e[0], e[1]) / (np.linalg.norm(e[0]) * np.linalg.norm(e[1]) + 1e-12))
        return T.merge_tracks(found, frames, distance if emb is not None else None)

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        paths_out, people_out = [], []
        for videos in items_of(self, batch):
            per_video, counts = [], []
            for v in videos or []:
                n, tracks = self.tracks_of(v)
                stem = T.video_stem(v)
                files = []
                for i, t in enumerate(tracks):
                    path = os.path.join(os.path.abspath(p.face_track_bbox_path), f"{stem}_{i}.pkl")
                    T.write_pickle(path, {"frame": [int(f) for f in t["track"]["frame"]],
                                          "xy_bbox": np.asarray(t["track"]["bbox"], np.float64).tolist(),
                                          "xys_bbox": {k: [float(x) for x in t["proc_track"][k]]
                                                       for k in ("x", "y", "s")},
                                          "xy_human_bbox": {k: [float(x) for x in t["human_bbox"][k]]
                                                            for k in ("x1", "y1", "x2", "y2")}})
                    files.append({"bbox_path": path})
                per_video.append(files)
                counts.append(n)
            paths_out.append(per_video)
            people_out.append(counts)
        return C.with_meta(batch, {p.tag_field_name_human_track_path: pa.array(paths_out, TRACK_LIST),
                                   p.tag_field_name_people_num: pa.array(people_out, pa.list_(pa.int64()))})


ATTRIBUTE_INTERFACE = ("forward(faces: float32 (N, 3, 224, 224) RGB 0..1) -> (age (N,), gender (N, 2) [Woman, Man], "
                       "race (N, 6) [asian, indian, black, white, middle eastern, latino hispanic])")

DEMOGRAPHIC_TYPE = pa.list_(pa.list_(pa.struct([("face_attribute_path", pa.string()), ("age", pa.float64()),
                                                ("gender", pa.list_(pa.string())),
                                                ("race", pa.list_(pa.string()))])))


def median(values: list) -> float:
    s = sorted(values)
    n, mid = len(s), len(s) // 2
    return float(s[mid]) if n % 2 else (s[mid - 1] + s[mid]) / 2


def most_frequent(values: list[str]) -> list[str]:
    """[the most frequent value (first seen on a tie), its share as a string] (Data-Juicer's tuple)."""
    value, count = collections.Counter(values).most_common(1)[0]
    return [value, str(count / len(values))]


@register("video_human_tracks_face_demographic_mapper")
class VideoHumanTracksFaceDemographicMapper(Mapper):
    """Age, gender and race of each human track's face (a face-attribute model on crops every few frames):
    ``meta.video_facetrack_attribute_demographic`` per video, per track; per-frame records in pickles."""

    inputs = ("{video_key}", "meta.human_track_data_path?")
    outputs = ("meta.{tag_field_name}",)
    requires = ("cv2",)
    resources = Resources(memory=2 * 2**30)
    version = 1

    class Params(_Params):
        original_data_save_path: str = trust.path_param("write", "./outputs/demographic", description="Directory "
                                                        "the per-frame attribute pickles are written to.")
        detect_interval: int = Field(5, ge=1, description="Frames between two classified faces of a track (tracks "
                                                          "over 75 frames: len // 15).")
        tag_field_name: str = Field(DEMOGRAPHIC, description="Meta field the attributes go to.")
        face_attribute_model: str | None = trust.path_param(
            "model", None, description="Age/gender/race model (required; Data-Juicer's DeepFace models are not "
                                       "run): an ONNX file or TorchScript export (a path or a store name) with "
                                       "forward(faces: float32 (N, 3, 224, 224) RGB 0..1) -> (age (N,), gender "
                                       "(N, 2) [Woman, Man], race (N, 6) [asian, indian, black, white, middle "
                                       "eastern, latino hispanic]) (gristmill).")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        if not p.face_attribute_model:
            raise ValueError(f"{self.name}: face_attribute_model is required: an ONNX file or TorchScript export "
                             f"with {ATTRIBUTE_INTERFACE} (Data-Juicer's DeepFace models are downloaded at run time "
                             f"and not run here)")
        self._model_file = p.face_attribute_model
        T.check_model_file(self._model_file, "face_attribute_model")
        trust.check_write(p.original_data_save_path, "original_data_save_path")

    def models(self) -> list[str]:
        return T.file_store_names(self._model_file)

    def missing_libraries(self) -> list[str]:
        from ...core import extras
        return extras.missing(("onnxruntime",) if self._model_file.endswith(".onnx") else ("torch",))

    def attributes(self, crops: list[np.ndarray]) -> list[dict]:
        """DeepFace's analyze record of each BGR face crop."""
        import cv2
        model = self.resource("attributes", lambda: T.ExportModel(
            T.model_file(self._model_file, "face_attribute_model"), self.params.device, ATTRIBUTE_INTERFACE))
        x = np.stack([cv2.resize(cv2.cvtColor(c, cv2.COLOR_BGR2RGB), (224, 224)) for c in crops])
        age, gender, race = model(x.astype(np.float32).transpose(0, 3, 1, 2) / 255.0)[:3]
        age, gender, race = age.reshape(len(crops)), gender.reshape(len(crops), 2), race.reshape(len(crops), 6)
        out = []
        for a, g, r in zip(age, gender, race):
            out.append({"age": int(a), "gender": {k: float(v) * 100 for k, v in zip(GENDERS, g)},
                        "dominant_gender": GENDERS[int(np.argmax(g))],
                        "race": {k: float(v) * 100 for k, v in zip(RACES, r)},
                        "dominant_race": RACES[int(np.argmax(r))]})
        return out

    def track_attributes(self, frames: np.ndarray, track: dict) -> dict[int, list[dict]]:
        """{frame: [record]} over the track's sampled frames."""
        fr, xys = track["frame"], track["xys_bbox"]
        step = int(len(fr) / 15) if len(fr) > 75 else self.params.detect_interval
        picks = list(range(0, len(fr), max(step, 1)))
        crops = [T.face_crop(frames[int(fr[k])], xys["s"][k], xys["x"][k], xys["y"][k], 0.5) for k in picks]
        recs = self.attributes(crops) if crops else []
        return {int(fr[k]): [rec] for k, rec in zip(picks, recs)}

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params

        def video_records(video, frames, tracks) -> list[dict]:
            stem = T.video_stem(video)
            recs = []
            for ti, t in enumerate(tracks):
                data = self.track_attributes(frames, T.read_track(t["bbox_path"]))
                path = T.write_pickle(os.path.join(os.path.abspath(p.original_data_save_path),
                                                   f"{stem}_{ti}.pkl"), data)
                vals = [v[0] for v in data.values() if v]
                recs.append({"face_attribute_path": path,
                             "age": median([v["age"] for v in vals]) if vals else None,
                             "gender": most_frequent([v["dominant_gender"] for v in vals]) if vals else [None, "0"],
                             "race": most_frequent([v["dominant_race"] for v in vals]) if vals else [None, "0"]})
            return recs

        out = per_video_tracks(self, batch, video_records)
        return C.with_meta(batch, {p.tag_field_name: pa.array(out, DEMOGRAPHIC_TYPE)})
