"""What the HumanVBench ops (Data-Juicer 1.6.1's human-track family) share: reading a whole video as BGR
frames (as Data-Juicer's ``get_video_array_cv2``), user-supplied model exports, the face and person detectors,
face tracking, the human-box clean-up, track merging, the track files and the face crops.

Model exports (``ExportModel``): a file ending in ``.onnx`` runs with onnxruntime (its inputs in declaration
order), any other file must be a TorchScript export (``torch.jit.save``); outputs come back as numpy arrays.
Detectors (``Detector``) take one RGB frame and return ``(N, 5)`` boxes ``x1, y1, x2, y2, score`` in frame
pixels: an export with the interface ``forward(image: float32 (1, 3, H, W), RGB, 0..255) -> (N, 4|5)``
(a missing score column counts as 1.0; the export does its own resizing and non-maximum suppression), or
OpenCV's built-in detectors that ship in its wheel (the frontal-face Haar cascade, the HOG people detector).

Track files are pickles of plain lists, dicts and floats (Data-Juicer's layout); ``read_track`` unpickles
with an allow-list (builtins and numpy arrays only), so a row naming an arbitrary pickle runs no code.
Imports cv2 / torch / onnxruntime inside functions."""
from __future__ import annotations

import io
import math
import os
import pickle

import numpy as np

from ... import models as store
from ...core import trust
from ...media import inference as inf

TRACK_FPS = 25  # Data-Juicer's face-clip and audio-crop rate (the HumanVBench scripts assume 25 fps videos)


# -- video -----------------------------------------------------------------------------------------------
def video_array(value) -> np.ndarray:
    """Every frame of a video as a ``(T, H, W, 3)`` uint8 BGR array (Data-Juicer's ``get_video_array_cv2``);
    ValueError naming the video when it cannot be read."""
    import cv2

    from ...media.video import as_file
    with as_file(value) as path:
        cap = cv2.VideoCapture(path)
        frames = []
        try:
            while cap.isOpened():
                ok, f = cap.read()
                if not ok:
                    break
                frames.append(f)
        finally:
            cap.release()
    if not frames:
        raise ValueError(f"cannot read any frame of video {value if isinstance(value, str) else '<bytes>'}")
    return np.stack(frames)


def video_stem(value) -> str:
    """Data-Juicer's name stem of a video (its file name less the last 4 characters: ``clip.mp4`` → ``clip``)
    plus a short digest of its path or bytes, so same-named videos of different folders never share files."""
    from ...media.paths import digest
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "video_" + digest(bytes(value))[:12]
    return os.path.basename(value)[:-4] + "_" + digest(os.path.abspath(value))[:8]


# -- model exports -----------------------------------------------------------------------------------------
def local_file(ref: str, param: str) -> str:
    """A model file param's path, checked against the trust policy; FileNotFoundError when absent."""
    path = os.path.expanduser(trust.check_read(ref, param))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{param}: no model file at {ref}")
    return path


def is_store_name(ref: str) -> bool:
    """A model-store file name (``NAME.onnx``, ``NAME.torchscript.pt``...) rather than a path."""
    return bool(ref) and store.kind(ref) is not None and trust.is_model_name(ref) and "/" not in ref


def check_model_file(ref: str, param: str) -> None:
    """At build time: a store name must be in the store (unless checking is off), a path must be a file."""
    if is_store_name(ref):
        if store.checking() and store.find(ref) is None:
            store.resolve(ref)  # ModelMissing, one line with the fix
        return
    local_file(ref, param)


def model_file(ref: str, param: str) -> str:
    """The local file of a model param: a path (trust-checked) or a model-store name."""
    return store.resolve(ref) if is_store_name(ref) else local_file(ref, param)


def file_store_names(*refs) -> list[str]:
    return [r for r in refs if r and is_store_name(r)]


class ExportModel:
    """A user-supplied ONNX (onnxruntime) or TorchScript (torch.jit) export; ``model(*arrays)`` returns a
    tuple of numpy arrays. ``what`` names the interface in the error for a file that is neither."""

    def __init__(self, path: str, device: str, what: str):
        self.onnx = path.endswith(".onnx")
        if self.onnx:
            import onnxruntime as ort
            opts = ort.SessionOptions()
            if inf.model_threads():
                opts.intra_op_num_threads = inf.model_threads()
            cuda = "CUDAExecutionProvider" in ort.get_available_providers() and (
                device == "auto" or device.startswith("cuda"))
            idx = int(device.split(":")[1]) if device.startswith("cuda:") else 0
            prov = [("CUDAExecutionProvider", {"device_id": idx}), "CPUExecutionProvider"] if cuda else \
                ["CPUExecutionProvider"]
            self.session = ort.InferenceSession(path, opts, providers=prov)
            self.inputs = [i.name for i in self.session.get_inputs()]
            return
        try:
            self.module, self.device = inf.load_torchscript(path, device)
        except (RuntimeError, ValueError) as e:
            raise ValueError(f"{path} is neither an ONNX file (.onnx) nor a TorchScript export: {what} "
                             f"({type(e).__name__})") from None

    def __call__(self, *arrays, extra=()) -> tuple:
        """Run on numpy ``arrays`` (float32); ``extra``: further non-tensor arguments (TorchScript only)."""
        if self.onnx:
            outs = self.session.run(None, {n: np.ascontiguousarray(a, np.float32)
                                           for n, a in zip(self.inputs, arrays)})
            return tuple(np.asarray(o) for o in outs)
        import torch
        with torch.inference_mode():
            out = self.module(*[torch.from_numpy(np.ascontiguousarray(a, np.float32)).to(self.device)
                                for a in arrays], *extra)
        out = out if isinstance(out, (tuple, list)) else (out,)
        return tuple(o.float().cpu().numpy() if hasattr(o, "cpu") else np.asarray(o) for o in out)


DETECTOR_INTERFACE = ("forward(image: float32 (1, 3, H, W) RGB 0..255) -> (N, 4|5) boxes x1, y1, x2, y2[, score] "
                      "in frame pixels")


class Detector:
    """Boxes in one RGB frame: ``(N, 5)`` float ``x1, y1, x2, y2, score``. ``kind``: ``face`` (the built-in is
    OpenCV's haarcascade_frontalface_alt) or ``person`` (OpenCV's HOG people detector)."""

    def __init__(self, kind: str, path: str | None, device: str):
        self.kind = kind
        self.model = ExportModel(path, device, DETECTOR_INTERFACE) if path else None
        if self.model is None:
            import cv2
            if kind == "face":
                self.cascade = cv2.CascadeClassifier(os.path.join(cv2.data.haarcascades,
                                                                  "haarcascade_frontalface_alt.xml"))
            else:
                self.hog = cv2.HOGDescriptor()
                self.hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())

    def __call__(self, rgb: np.ndarray) -> np.ndarray:
        if self.model is not None:
            x = rgb.astype(np.float32).transpose(2, 0, 1)[None]
            out = np.asarray(self.model(x)[0], np.float64)
            if out.size == 0:
                return np.zeros((0, 5))
            out = out.reshape(-1, out.shape[-1])
            if out.shape[1] == 4:
                out = np.hstack([out, np.ones((len(out), 1))])
            return out[:, :5]
        import cv2
        if self.kind == "face":
            gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
            rects = self.cascade.detectMultiScale(gray, scaleFactor=1.1, minNeighbors=3)
            weights = np.ones(len(rects))
        else:
            rects, weights = self.hog.detectMultiScale(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), winStride=(8, 8))
        rects = np.asarray(rects, np.float64).reshape(-1, 4)
        boxes = np.stack([rects[:, 0], rects[:, 1], rects[:, 0] + rects[:, 2], rects[:, 1] + rects[:, 3],
                          np.asarray(weights, np.float64).reshape(-1)], axis=1) if len(rects) else np.zeros((0, 5))
        return boxes


# -- tracking (Data-Juicer's track_shot, find_human_bounding_box, anomaly clean-up, post_merge) --------------
def iou(a, b, eval_col: bool = False) -> float:
    xa, ya, xb, yb = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    inter = max(0, xb - xa) * max(0, yb - ya)
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    den = float(area_a) if eval_col else float(area_a + area_b - inter)
    return inter / den if den else 0.0


def track_faces(frame_faces: list[list[dict]], num_failed: int = 8, min_track: int = 10,
                iou_thres: float = 0.55) -> list[dict]:
    """Face tracks of one shot: greedy chains of detections (``{"frame", "bbox"}``) whose IoU with the chain's
    last face exceeds ``iou_thres`` within ``num_failed`` frames; chains longer than ``min_track`` are
    interpolated linearly over their missing frames (``{"frame": int array, "bbox": (n, 4)}``) and kept when
    their mean width or height exceeds 1 pixel."""
    faces = [list(f) for f in frame_faces]
    tracks = []
    while True:
        track: list[dict] = []
        for ff in faces:
            best, best_iou = None, 0.0
            for face in list(ff):
                if not track:
                    track.append(face)
                    ff.remove(face)
                elif face["frame"] - track[-1]["frame"] <= num_failed and face["frame"] != track[-1]["frame"]:
                    v = iou(face["bbox"], track[-1]["bbox"])
                    if v > iou_thres and v > best_iou:
                        best, best_iou = face, v
                else:
                    break
            if best is not None:
                track.append(best)
                ff.remove(best)
        if not track:
            return tracks
        if len(track) > min_track:
            fn = np.array([f["frame"] for f in track])
            bb = np.array([f["bbox"] for f in track], np.float64)
            fi = np.arange(fn[0], fn[-1] + 1)
            bi = np.stack([np.interp(fi, fn, bb[:, j]) for j in range(4)], axis=1)
            if max(np.mean(bi[:, 2] - bi[:, 0]), np.mean(bi[:, 3] - bi[:, 1])) > 1:
                tracks.append({"frame": fi, "bbox": bi})


def human_box_of(face, humans) -> tuple | None:
    """The person box containing the face box whose centre is nearest the face's (plus its area), or None."""
    cx = (face[0] + face[2]) / 2
    cands = [h[:4] for h in humans if h[0] <= face[0] and face[2] <= h[2] and h[1] <= face[1] and face[3] <= h[3]]
    if not cands:
        return None
    return tuple(min(cands, key=lambda b: ((b[0] + b[2]) / 2 - cx) ** 2 + (b[2] - b[0]) * (b[3] - b[1])))


def mark_anomalies(data, window: int = 30, std_multiplier: float = 10) -> np.ndarray:
    """Positive values further than ``std_multiplier`` standard deviations from the mean of their positive
    neighbours (``window`` each side, values equal to them excluded; at least two) become -1."""
    data = np.asarray(data, np.float64)
    out = data.copy()
    for i in range(len(data)):
        if data[i] > 0:
            nb = data[max(0, i - window):min(len(data), i + window + 1)]
            nb = nb[(nb != data[i]) & (nb > 0)]
            if len(nb) >= 2 and abs(data[i] - nb.mean()) > nb.std() * std_multiplier:
                out[i] = -1
    return out


def fill_missing(values) -> list:
    """Each -1 replaced by the mean of its nearest valid neighbours (or the one there is)."""
    v = list(values)
    n = len(v)
    for i in range(n):
        if v[i] == -1:
            lo = i - 1
            while lo >= 0 and v[lo] == -1:
                lo -= 1
            hi = i + 1
            while hi < n and v[hi] == -1:
                hi += 1
            if lo >= 0 and hi < n:
                v[i] = (v[lo] + v[hi]) / 2
            elif lo >= 0:
                v[i] = v[lo]
            elif hi < n:
                v[i] = v[hi]
            else:
                raise ValueError("no valid value to fill a missing human box coordinate")
    return v


def medfilt5(values) -> list[float]:
    """A 5-wide running median, zero-padded at both ends (scipy.signal.medfilt's)."""
    x = np.pad(np.asarray(values, np.float64), 2)
    win = np.lib.stride_tricks.sliding_window_view(x, 5)
    return np.median(win, axis=1).tolist()


def face_and_human_track(track: dict, humans_at) -> dict | None:
    """A face track with its crop centres (``proc_track``: x, y, s = half the longer side) and its person
    boxes (``human_bbox``: per frame the box of ``human_box_of``, gaps and outliers filled, median-filtered);
    None when no frame has a person box."""
    bb = track["bbox"]
    dets = {"x": ((bb[:, 0] + bb[:, 2]) / 2).tolist(), "y": ((bb[:, 1] + bb[:, 3]) / 2).tolist(),
            "s": (np.maximum(bb[:, 3] - bb[:, 1], bb[:, 2] - bb[:, 0]) / 2).tolist()}
    coords: dict[str, list] = {"x1": [], "y1": [], "x2": [], "y2": []}
    for k, f in enumerate(track["frame"]):
        h = human_box_of(bb[k], humans_at(int(f)))
        for j, c in enumerate(("x1", "y1", "x2", "y2")):
            coords[c].append(-1 if h is None else float(h[j]))
    if all(v < 0 for v in coords["x1"]):
        return None
    human = {}
    for c in ("x1", "y1", "x2", "y2"):
        v = coords[c]
        if any(x < 0 for x in v):
            v = fill_missing(mark_anomalies(v).tolist())
        human[c] = medfilt5(v)
    return {"track": track, "proc_track": dets, "human_bbox": human}


def _merge(a: dict, b: dict) -> dict:
    return {"proc_track": {k: a["proc_track"][k] + b["proc_track"][k] for k in ("x", "y", "s")},
            "human_bbox": {k: a["human_bbox"][k] + b["human_bbox"][k] for k in ("x1", "y1", "x2", "y2")},
            "track": {k: np.concatenate([a["track"][k], b["track"][k]]) for k in a["track"]}}


def face_crop(frame: np.ndarray, s: float, x: float, y: float, cs: float) -> np.ndarray:
    """Data-Juicer's face crop: the frame padded with grey (110) by ``int(s * (1 + 2 cs))``, then rows
    ``y - s .. y + s (1 + 2 cs)`` and columns ``x - s (1 + cs) .. x + s (1 + cs)`` around the box centre."""
    bsi = int(s * (1 + 2 * cs))
    pad = np.pad(frame, ((bsi, bsi), (bsi, bsi), (0, 0)), "constant", constant_values=(110, 110))
    my, mx = y + bsi, x + bsi
    return pad[int(my - s):int(my + s * (1 + 2 * cs)), int(mx - s * (1 + cs)):int(mx + s * (1 + cs))]


def merge_tracks(tracks: list[dict], frames: np.ndarray, distance_extra=None) -> tuple[int, list[dict]]:
    """Data-Juicer's ``post_merge``: the largest set of tracks sharing a frame are the anchors (people seen
    at once: the people count); each anchor is extended backwards and forwards by a remaining track that
    ends (starts) one or two frames before (after) it, the nearest by ``2 exp(-5 IoU)`` of the touching boxes
    (IoU <= 0.2: no merge) plus ``distance_extra(face_a, face_b)`` (Data-Juicer: Facenet's distance, + 10000
    above 0.85) when given, until nothing joins. The 5 longest tracks are kept, and of those the ones longer
    than 15 frames."""
    if not tracks:
        return 0, []
    frame_sets = [set(int(f) for f in t["track"]["frame"]) for t in tracks]
    best: list[int] = []
    for e in sorted(set().union(*frame_sets)):
        idx = [i for i, fs in enumerate(frame_sets) if e in fs]
        if len(idx) > len(best):
            best = idx
    anchors = [tracks[i] for i in best]
    remaining = [t for i, t in enumerate(tracks) if i not in best]

    def dist(a, b):
        v = iou(a["track"]["bbox"][-1], b["track"]["bbox"][0])
        d = 10000.0 if v <= 0.2 else math.exp(-5 * v)
        extra = 0.0
        if distance_extra is not None:
            fa = face_crop(frames[int(a["track"]["frame"][-1])], a["proc_track"]["s"][-1], a["proc_track"]["x"][-1],
                           a["proc_track"]["y"][-1], 0.4)
            fb = face_crop(frames[int(b["track"]["frame"][0])], b["proc_track"]["s"][0], b["proc_track"]["x"][0],
                           b["proc_track"]["y"][0], 0.4)
            extra = distance_extra(fa, fb)
            if extra > 0.85:
                extra += 10000
        return 2 * d + extra

    flags = np.ones((len(anchors), 2), bool)
    while flags.any():
        for k in range(len(anchors)):
            t = anchors[k]
            if flags[k, 0]:
                start = int(t["track"]["frame"][0])
                cands = [c for c in remaining if int(c["track"]["frame"][-1]) + 1 == start
                         or int(c["track"]["frame"][-1]) + 2 == start] if start != 0 else []
                ds = [dist(c, t) for c in cands]
                if ds and min(ds) < 10000:
                    c = cands[int(np.argmin(ds))]
                    t = anchors[k] = _merge(c, t)
                    remaining = [r for r in remaining if r is not c]
                else:
                    flags[k, 0] = False
            if flags[k, 1]:
                end = int(t["track"]["frame"][-1])
                cands = [c for c in remaining if int(c["track"]["frame"][0]) - 1 == end
                         or int(c["track"]["frame"][0]) - 2 == end]
                ds = [dist(t, c) for c in cands]
                if ds and min(ds) < 10000:
                    c = cands[int(np.argmin(ds))]
                    anchors[k] = _merge(t, c)
                    remaining = [r for r in remaining if r is not c]
                else:
                    flags[k, 1] = False
    final = anchors + remaining
    if len(final) > 5:
        final = sorted(final, key=lambda t: len(t["track"]["frame"]), reverse=True)[:5]
    return len(anchors), [t for t in final if len(t["track"]["frame"]) > 15]


# -- track files ---------------------------------------------------------------------------------------------
_ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "scalar"), ("builtins", "tuple"), ("builtins", "list"),
            ("builtins", "dict"), ("builtins", "set"), ("builtins", "frozenset")}


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused to load {module}.{name} from a track file")


def read_track(path: str, what: str = "bbox_path") -> dict:
    """A track file (``bbox_path``) as written by ``video_human_tracks_extraction_mapper`` (or Data-Juicer's:
    numpy arrays allowed, nothing else that runs code)."""
    real = trust.check_read(path, what)
    with open(real, "rb") as f:
        return _SafeUnpickler(io.BytesIO(f.read())).load()


def write_pickle(path: str, obj) -> str:
    from ...media.paths import write_atomic

    def write(tmp):
        with open(tmp, "wb") as f:
            pickle.dump(obj, f, protocol=4)
    write_atomic(path, write)
    return path


def tolist(x) -> list:
    return x.tolist() if hasattr(x, "tolist") else list(x)
