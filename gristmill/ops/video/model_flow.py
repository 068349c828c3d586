"""``video_motion_score_raft_filter`` and ``video_motion_score_ptlflow_filter`` (Data-Juicer 1.6.1's): the motion
score of ``video_motion_score_filter`` (same frames, same resizing, same stat ``video_motion_score``: the mean over
consecutive sampled frame pairs of the mean flow magnitude, relative to the frame diagonal with ``relative``; -1
for a video with fewer than two frames; ``if_output_optical_flow`` stores the flows as there) with the optical flow
of a deep model instead of Farneback's.

Data-Juicer downloads torchvision's ``raft_large`` weights, or runs a ``ptlflow`` model (``model_name`` /
``ckpt_path``). gristmill runs neither package (torchvision would pin another torch): it loads an export of the
flow model, ``flow_model`` (a file path, or a file name in the model store: ``gristmill models add NAME FILE``):

- **ONNX** (``*.onnx``, run with onnxruntime): two inputs in graph order, frame 1 and frame 2, float32
  ``(B, 3, H, W)``; the flow is the graph's **last** output, float32 ``(B, 2, H, W)`` (x then y displacement in
  pixels, from frame 1 to frame 2). RAFT exports list every refinement: the last is the final one.
- **TorchScript** (anything else, ``torch.jit.save``): ``forward(frame1: Tensor, frame2: Tensor)`` with the same
  tensors, returning the flow tensor or a list/tuple whose last item is it.

H and W are the (resized) frame's: exports must accept dynamic sizes, or the recipe must fix them with ``size`` /
``divisible`` (default 8, as RAFT needs). What the frames hold is what each original model is fed:

- RAFT: RGB scaled to ``[-1, 1]`` (``x / 127.5 - 1``; torchvision's ``Normalize(0.5, 0.5)``), e.g. the export of
  ``lambda a, b: torchvision.models.optical_flow.raft_large(weights=DEFAULT)(a, b)[-1]``;
- ptlflow: BGR scaled to ``[0, 1]`` (what ``IOAdapter.prepare_inputs`` feeds), e.g. the export of
  ``lambda a, b: model({"images": torch.stack([a, b], 1)})["flows"][:, 0]``.

The default ``flow_model`` is ``raft_large.onnx``, and for ptlflow ``ckpt_path`` when it names an ``.onnx`` /
``.pt`` file, else ``<model_name>-<ckpt_path>.onnx`` (``dpflow-things.onnx``). Frame pairs of a video are run
``batch_size`` at a time (the model sees each pair on its own, so batching does not change the flows); one video's
frames of a chunk are held at a time."""
from __future__ import annotations

import sys

import numpy as np
from pydantic import Field, PositiveFloat, PositiveInt

from ...core import extras
from ...core import trust
from ...core.resources import Resources
from ...media import inference as inf
from ...registry import register
from . import _export as X
from .motion import VideoMotionScoreFilter, resized_dims
from ._common import VideoParams


class FlowModel:
    """``flows(frames1, frames2) -> (B, 2, H, W)`` float32 from an ONNX or TorchScript export."""

    def __init__(self, ref: str, device: str):
        path = X.model_file(ref, "flow_model")
        self.onnx = X.is_onnx(path)
        if self.onnx:
            self.session = X.onnx_session(path, device)
            self.inputs = [i.name for i in self.session.get_inputs()]
            if len(self.inputs) != 2:
                raise ValueError(f"flow_model {ref}: the ONNX graph takes {len(self.inputs)} input(s), not the two "
                                 f"frames")
        else:
            try:
                self.module, self.device = inf.load_torchscript(path, device)
            except (RuntimeError, ValueError) as e:
                raise ValueError(f"flow_model {ref}: neither an ONNX file (*.onnx) nor a TorchScript export "
                                 f"({str(e).splitlines()[0][:200]})") from None

    def flows(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self.onnx:
            out = self.session.run(None, {self.inputs[0]: a, self.inputs[1]: b})[-1]
        else:
            import torch
            with torch.inference_mode():
                out = self.module(torch.from_numpy(a).to(self.device), torch.from_numpy(b).to(self.device))
            if isinstance(out, (list, tuple)):
                out = out[-1]
            out = out.float().cpu().numpy()
        out = np.asarray(out, np.float32)
        if out.ndim != 4 or out.shape[0] != a.shape[0] or out.shape[1] != 2:
            raise ValueError(f"flow_model: output of shape {tuple(out.shape)}, not (B, 2, H, W) with B={a.shape[0]}")
        return out


class _DeepFlowFilter(VideoMotionScoreFilter):
    requires = ("cv2",)
    resources = Resources(memory=4 * 2**30)
    version = 1

    def default_model(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_input(self, bgr: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def ref(self) -> str:
        return self.params.flow_model or self.default_model()

    def __init__(self, **params):
        super().__init__(**params)
        X.check_file(self.ref, "flow_model", "an ONNX or TorchScript export of the flow model")

    def models(self) -> list[str]:
        return X.store_names(self.ref)

    def missing_libraries(self) -> list[str]:
        runtime = "onnxruntime" if X.is_onnx(self.ref) else "torch"
        return extras.missing(self.requires + (runtime,) + (("PIL",) if self.params.frame_field else ()))

    def _model(self) -> FlowModel:
        return self.resource("flow", lambda: FlowModel(self.ref, self.params.device))

    def _scores(self, frames, hw):
        """(mean flow magnitude, the flows or None) over consecutive frames of an iterator of BGR arrays, the
        model run on ``batch_size`` pairs at a time."""
        import cv2
        p = self.params
        scores, flows, held, diag = [], [], [], None  # held: prepared frames, the last one carried over

        def run():
            a, b = np.stack(held[:-1]), np.stack(held[1:])
            for f in self._model().flows(a, b):
                f = np.ascontiguousarray(f.transpose(1, 2, 0))
                if p.if_output_optical_flow:
                    flows.append(f)
                mag, _ = cv2.cartToPolar(f[..., 0], f[..., 1])
                s = float(np.mean(mag))
                scores.append(s / diag if p.relative else s)
            del held[:-1]

        for f in frames:
            if hw is not None:
                new = resized_dims(hw, p.size, p.max_size, p.divisible)
                if new != tuple(hw):
                    f = cv2.resize(f, new, interpolation=cv2.INTER_AREA)
            diag = np.hypot(*f.shape[:2])
            held.append(self.to_input(f))
            if len(held) > p.batch_size:
                run()
        if len(held) > 1:
            run()
        score = float(np.mean(scores or [-1]))
        if not p.if_output_optical_flow:
            return score, None
        return score, (np.stack(flows) if flows else np.zeros((0, 0, 0, 2), np.float32))


class _DeepFlowParams(VideoParams):
    min_score: float = Field(1.0, description="Minimum motion score.")
    max_score: float = Field(sys.float_info.max, description="Maximum motion score.")
    frame_field: str | None = Field(None, description="Use this field's per-video frame images instead of decoding "
                                                      "videos.")
    sampling_fps: PositiveFloat = Field(2, description="Frames per second sampled for the flow.")
    original_fps: PositiveFloat | None = Field(None, description="Frame rate of frame_field's frames.")
    size: PositiveInt | list[PositiveInt] | None = Field(None, description="Resize frames: short edge, or (h, w).")
    max_size: PositiveInt | None = Field(None, description="Cap on the long edge after resizing.")
    divisible: PositiveInt = Field(8, description="Resized sides are multiples of this.")
    relative: bool = Field(False, description="Divide each magnitude by the frame diagonal.")
    if_output_optical_flow: bool = Field(False, description="Store each video's optical flows, shape "
                                         "(pairs, H, W, 2), in the meta field optical_flow_key.")
    optical_flow_key: str = Field("video_optical_flow", description="Meta field for the optical flows.")
    flow_model: str = trust.path_param("model", "", description="ONNX (*.onnx) or TorchScript export of the flow "
                                       "model: a file, or a file name in the model store (gristmill; empty: the "
                                       "op's default name).")
    batch_size: PositiveInt = Field(4, description="Frame pairs per model call (gristmill).")
    device: str = Field("auto", description="Device: 'auto' (CUDA when available, else CPU), 'cpu', 'cuda:1'... "
                                            "(gristmill).")


@register("video_motion_score_raft_filter")
class VideoMotionScoreRaftFilter(_DeepFlowFilter):
    """Keep samples whose videos' motion score (mean RAFT optical-flow magnitude between sampled frames, in pixels
    or relative to the frame diagonal) is within range; stat ``video_motion_score`` per video. RAFT runs from an
    ONNX / TorchScript export (``flow_model``, default ``raft_large.onnx``): inputs two frames, RGB in [-1, 1],
    float32 (B, 3, H, W); output the flow (B, 2, H, W)."""

    class Params(_DeepFlowParams):
        pass

    def default_model(self) -> str:
        return "raft_large.onnx"

    def to_input(self, bgr):
        return (bgr[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) / 255.0 - 0.5) / 0.5


@register("video_motion_score_ptlflow_filter")
class VideoMotionScorePtlflowFilter(_DeepFlowFilter):
    """Keep samples whose videos' motion score (mean optical-flow magnitude of a ptlflow model between sampled
    frames) is within range; stat ``video_motion_score`` per video. The model runs from an ONNX / TorchScript
    export (``flow_model``; default ``ckpt_path`` when it is such a file, else ``<model_name>-<ckpt_path>.onnx``):
    inputs two frames, BGR in [0, 1], float32 (B, 3, H, W); output the flow (B, 2, H, W)."""

    class Params(_DeepFlowParams):
        model_name: str = Field("dpflow", description="ptlflow model name (names the default export).")
        ckpt_path: str | None = trust.path_param("model", "things", description="ptlflow checkpoint name (names "
                                                 "the default export), or an ONNX / TorchScript export file.")
        get_model_args: dict | None = Field(None, description="ptlflow's model args: baked into an export, unused "
                                                              "(gristmill).")

    def default_model(self) -> str:
        p = self.params
        ck = p.ckpt_path or "things"
        if ck.lower().endswith((".onnx", ".pt", ".pth", ".ts")):
            return ck
        return f"{p.model_name}-{ck}.onnx"

    def to_input(self, bgr):
        return bgr.transpose(2, 0, 1).astype(np.float32) / 255.0
