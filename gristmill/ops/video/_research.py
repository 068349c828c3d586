"""What the research-model ops (Data-Juicer's camera calibration, camera pose, hand and body reconstruction,
VGGT and MMPose ops) share: a user-supplied exported model, named by a param, run on numpy arrays.

Data-Juicer runs these models with each project's own code (cloned from GitHub at run time, CUDA extensions
built on the spot). gristmill runs an export of the model instead, at an interface each op's docstring and
docs/dj-compat.md document (inputs, outputs, shapes, units), and does Data-Juicer's pre- and post-processing
around it:

- ``*.onnx``: onnxruntime (CUDA when the device is ``cuda`` and onnxruntime has that provider, else the CPU);
- anything else: TorchScript (``torch.jit.save`` of a scripted or traced module), loaded with
  ``torch.jit.load`` on the op's device.

The param is a file path or the name of a file in the model store (``gristmill models add NAME FILE``);
nothing is downloaded. Inputs are given in the documented order, matched by name where the export's input
names are the documented ones (ONNX input names, TorchScript ``forward`` argument names), else by position.
Outputs come back by name: an ONNX model's output names (when any is a documented name), a TorchScript
``Dict[str, Tensor]``'s keys, or the documented names in order for a tuple / a single tensor."""
from __future__ import annotations

import hashlib
import os

import numpy as np
import pyarrow as pa
from pydantic import Field

from ... import models as store
from ...core import columns as C
from ...core import extras, trust
from ...media import inference as inf
from ...media import media_values
from .._fields import _MISSING, _py_values
from ._export import check_file, is_onnx, model_file, onnx_session, store_names

DEVICE = Field("auto", description="Device of the export: 'auto' (CUDA when visible, else CPU), 'cpu', 'cuda:1'... "
                                   "(gristmill).")


def frame_key(frame) -> str:
    return frame if isinstance(frame, str) else hashlib.sha256(bytes(frame)).hexdigest()


def meta_values(batch, key: str) -> list:
    return [None if v is _MISSING else v for v in _py_values(batch, f"{C.META}.{key}")]


def field_values(batch, key: str) -> list:
    return [None if v is _MISSING else v for v in _py_values(batch, key)]


# Data-Juicer's checkpoints that need the research code (not an export): refused with this advice
_CHECKPOINT = (".h5", ".ckpt", ".pth", ".pkl", ".safetensors", ".bin")
_WHAT = "an ONNX (.onnx) or TorchScript (.torchscript.pt) export of the model"


def tag_samples(op, batch, fn) -> pa.RecordBatch:
    """``meta.<tag_field_name>``: ``fn(r, videos)`` for each row ``r`` with videos and no tag yet; a row already
    tagged keeps its tag, one without videos stays without it (Data-Juicer drops such a sample)."""
    p = op.params
    done = meta_values(batch, p.tag_field_name)
    out = [done[r] if done[r] is not None or not videos else fn(r, videos)
           for r, videos in enumerate(media_values(batch, p.video_key))]
    return C.with_meta(batch, {p.tag_field_name: pa.array(out)})


def check_export(ref: str | None, param: str) -> None:
    """At build time: ``ref`` is an existing file (inside the trust policy's roots) or a model-store name
    present in the store (``_export.check_file``); a Data-Juicer checkpoint name (``.h5``, ``.ckpt``, a Hugging
    Face repo id...) is refused with what to give instead. Store lookups are skipped inside
    ``models.unchecked()``."""
    repo_id = bool(ref) and store.is_hf_dir_name(ref) and not os.path.exists(os.path.expanduser(ref))
    if ref and store.checking() and (ref.lower().endswith(_CHECKPOINT) or repo_id):
        raise ValueError(f"{param}: {ref!r} is a checkpoint for the model's own research code, which gristmill "
                         f"does not run; give {_WHAT}, a file or a model-store name (docs/dj-compat.md documents "
                         f"the interface)")
    if ref or store.checking():
        check_file(ref, param, _WHAT)


def _numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        if x.is_floating_point() and str(x.dtype) != "torch.float64":
            x = x.float()
        return x.numpy()
    return np.asarray(x)


class Exported:
    """An exported model: ``run({name: array, ...}, outputs=(names...))`` → ``{name: array}``."""

    def __init__(self, ref: str, device: str, param: str = "model_path"):
        self.ref = ref
        path = model_file(ref, param)
        self.onnx = is_onnx(path)
        if self.onnx:
            try:
                self.session = onnx_session(path, device)
            except Exception as e:  # noqa: BLE001  (onnxruntime's own exception types)
                raise ValueError(f"{param}: {ref}: not a loadable ONNX model ({str(e).splitlines()[0]})") from None
            self.input_names = [i.name for i in self.session.get_inputs()]
            self.output_names = [o.name for o in self.session.get_outputs()]
            return
        try:
            self.module, self.device = inf.load_torchscript(path, device)
        except (RuntimeError, ValueError) as e:
            raise ValueError(f"{param}: {ref}: neither an ONNX model (.onnx) nor a TorchScript export "
                             f"({str(e).splitlines()[0]})") from None
        args = self.module.forward.schema.arguments
        self.input_names = [a.name for a in args[1:]]  # after self

    def _ordered(self, inputs: dict) -> list:
        names = self.input_names
        if all(n in inputs for n in names):
            return [inputs[n] for n in names]
        if len(names) <= len(inputs):
            return list(inputs.values())[:len(names)]
        raise ValueError(f"{self.ref}: the export takes {len(names)} inputs ({', '.join(names)}); this op gives "
                         f"{len(inputs)} ({', '.join(inputs)})")

    def run(self, inputs: dict, outputs: tuple[str, ...]) -> dict[str, np.ndarray]:
        """Run once; the outputs by name (see the module docstring)."""
        args = self._ordered(inputs)
        if self.onnx:
            got = self.session.run(None, {n: np.ascontiguousarray(a) for n, a in zip(self.input_names, args)})
            names = self.output_names if set(outputs) & set(self.output_names) else list(outputs)
            return {n: np.asarray(v) for n, v in zip(names, got)}
        import torch
        with torch.inference_mode():
            out = self.module(*[torch.from_numpy(np.ascontiguousarray(a)).to(self.device) for a in args])
        if isinstance(out, dict):
            return {str(k): _numpy(v) for k, v in out.items()}
        if isinstance(out, (tuple, list)):
            return {n: _numpy(v) for n, v in zip(outputs, out)}
        return {outputs[0]: _numpy(out)}


def need(out: dict, names, ref: str) -> None:
    """A clear error for an export that does not give the outputs the op needs."""
    missing = [n for n in names if n not in out]
    if missing:
        raise ValueError(f"{ref}: the export gave no output {', '.join(map(repr, missing))} (it gave "
                         f"{', '.join(out) or 'none'}); see the op's documented interface")


def read_bgr(value) -> np.ndarray:
    """An image (a path or encoded bytes) as OpenCV reads it: uint8 BGR ``(H, W, 3)``; a clear error when
    it cannot be decoded."""
    import cv2

    from ...media import check_item, describe
    check_item(value, "image")
    if isinstance(value, (bytes, bytearray, memoryview)):
        img = cv2.imdecode(np.frombuffer(bytes(value), np.uint8), cv2.IMREAD_COLOR)
    else:
        img = cv2.imread(value, cv2.IMREAD_COLOR)
    if img is None:
        raise ValueError(f"cannot decode image {describe(value)}")
    return img


def save_npy(save_dir: str, prefix: str, arr: np.ndarray, *key) -> str:
    """``arr`` as ``<save_dir>/<prefix>_<hash>.npy``, the hash of ``key`` (the source and the op's params) so
    a rerun writes the same name (Data-Juicer names them by a random uuid)."""
    from ...media.paths import digest, write_atomic
    path = os.path.join(os.path.abspath(save_dir), f"{prefix}_{digest(*key)[:12]}.npy")

    def write(tmp):
        with open(tmp, "wb") as f:
            np.save(f, arr)
    write_atomic(path, write)
    return path


def load_array(value) -> np.ndarray:
    """A stored array: a ``.npy`` path (Data-Juicer's ``save_dir`` form) or nested lists."""
    if isinstance(value, str):
        return np.load(trust.check_read(value, "array file"), allow_pickle=False)
    return np.asarray(value, np.float32)


def draw_points(img: np.ndarray, points: np.ndarray, color=(64, 70, 168)) -> np.ndarray:
    """``img`` (BGR) with ``points`` (N, 2, pixels) drawn as dots: the visualisations of these ops."""
    import cv2
    out = img.copy()
    h, w = out.shape[:2]
    r = max(1, round(max(h, w) / 300))
    for x, y in np.asarray(points, np.float64).reshape(-1, 2):
        if np.isfinite(x) and np.isfinite(y) and 0 <= x < w and 0 <= y < h:
            cv2.circle(out, (int(round(x)), int(round(y))), r, color, -1)
    return out


class ExportOp:
    """Mixin: the op's export params (``export_params``) checked when it is built, declared to the model
    store, each loaded once per worker on the op's ``device``."""

    export_params: tuple[str, ...] = ("model_path",)
    requires = ("cv2",)  # onnxruntime or torch: missing_libraries, by each export's file name

    def __init__(self, **params):
        super().__init__(**params)
        for name in self.export_params:
            check_export(self.export_ref(name), name)

    def export_ref(self, name: str) -> str | None:
        """The file or store name param ``name`` gives (an op whose param is a list overrides this)."""
        return getattr(self.params, name)

    def missing_libraries(self) -> list[str]:
        runtimes = {"onnxruntime" if (self.export_ref(n) or "").lower().endswith(".onnx") else "torch"
                    for n in self.export_params}
        return list(dict.fromkeys([*super().missing_libraries(), *extras.missing(tuple(sorted(runtimes)))]))

    def models(self) -> list[str]:
        return [n for p in self.export_params for n in store_names(self.export_ref(p) or "")]

    def exported(self, name: str | None = None) -> Exported:
        name = name or self.export_params[0]
        ref = self.export_ref(name)
        return self.resource(f"export:{name}", lambda: Exported(ref, self.params.device, name))


MESH_BGR = (168, 70, 64)  # Data-Juicer's mesh colour (0.251, 0.274, 0.659) as BGR


def project(points: np.ndarray, cam_t, focal: float, width: float, height: float) -> np.ndarray:
    """Pinhole projection of camera-frame ``points`` (N, 3) moved by ``cam_t``: focal ``focal``, principal point
    the image centre; (N, 2) pixels (WiLoR's ``project_full_img``)."""
    p = np.asarray(points, np.float64) + np.asarray(cam_t, np.float64)
    p = p / p[:, 2:3]
    return np.stack([focal * p[:, 0] + width / 2.0, focal * p[:, 1] + height / 2.0], axis=1)


def overlay(img: np.ndarray, meshes: list, faces, focal: float) -> np.ndarray:
    """``img`` (BGR) with meshes drawn over it: each ``(vertices (V, 3), cam_t (3,))`` projected with
    ``focal``; with ``faces`` (F, 3) the triangles are filled far to near in the mesh colour, shaded by how
    much each faces the camera; without, the vertices are dots."""
    import cv2
    h, w = img.shape[:2]
    if faces is None:
        out = img
        for verts, cam_t in meshes:
            out = draw_points(out, project(verts, cam_t, focal, w, h))
        return out
    out = img.copy()
    faces = np.asarray(faces, np.int64)
    tris = []
    for verts, cam_t in meshes:
        v = np.asarray(verts, np.float64) + np.asarray(cam_t, np.float64)
        uv = project(v, 0.0, focal, w, h)
        for f in faces:
            a, b, c = v[f]
            n = np.cross(b - a, c - a)
            norm = np.linalg.norm(n)
            shade = abs(n[2]) / norm if norm > 0 else 0.0
            tris.append((float(v[f, 2].mean()), uv[f], shade))
    for _z, pts, shade in sorted(tris, key=lambda t: -t[0]):
        color = tuple(int(c * (0.4 + 0.6 * shade)) for c in MESH_BGR)
        cv2.fillPoly(out, [np.round(pts).astype(np.int32)], color)
    return out


def write_obj(path: str, vertices: np.ndarray, faces, right: bool = True) -> None:
    """A mesh as Wavefront OBJ, as WiLoR's ``vertices_to_trimesh`` exports it: turned 180 degrees about x
    (y and z negated), left hands with their faces' winding reversed."""
    from ...media.paths import write_atomic
    v = np.asarray(vertices, np.float64) * np.array([1.0, -1.0, -1.0])
    f = np.asarray(faces, np.int64) + 1
    if not right:
        f = f[:, [0, 2, 1]]
    text = "".join(f"v {x:.8f} {y:.8f} {z:.8f}\n" for x, y, z in v) + "".join(f"f {a} {b} {c}\n" for a, b, c in f)

    def write(tmp):
        with open(tmp, "w") as fh:
            fh.write(text)
    write_atomic(path, write)


def write_image(path: str, bgr: np.ndarray) -> None:
    """A BGR image encoded by its extension (``.jpg``, ``.png``), written atomically."""
    import cv2

    from ...media.paths import write_atomic
    ok, buf = cv2.imencode(os.path.splitext(path)[1] or ".png", bgr)
    if not ok:
        raise ValueError(f"cannot encode {path}")

    def write(tmp):
        with open(tmp, "wb") as f:
            f.write(buf.tobytes())
    write_atomic(path, write)
