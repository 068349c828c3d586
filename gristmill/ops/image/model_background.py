"""``image_remove_background_mapper`` (Data-Juicer's): cut each image out of its background with rembg.

Data-Juicer calls ``rembg.remove(image)`` with rembg's default session, which downloads its model into
``~/.u2net`` the first time. gristmill gives rembg the model itself: ``model_path`` (gristmill; a U2Net-style
ONNX file, default the store name ``u2net.onnx``: ``gristmill models add u2net.onnx FILE`` with FILE from rembg's
model releases) runs as rembg's ``u2net_custom`` session, whose interface is U2Net's: input ``(1, 3, 320,
320)`` float32, the RGB image resized to 320x320 (Lanczos), divided by its largest value and normalised with
the ImageNet mean/std; the first output's first channel is the saliency map, min-max scaled to the mask. Any
U2Net, U2NetP, IS-Net or Silueta export fits. The cut-out itself (alpha matting with its thresholds and erosion,
the background colour ``bgcolor``) is rembg's ``remove``, with Data-Juicer's params.

Each cut-out is an RGBA PNG written beside its source (``__dj__produced_data__/<op>``, or ``save_dir`` /
``$DJ_PRODUCED_DATA_DIR``) with a ``.png`` extension, the sample points at it and ``__dj__source_file__``
keeps the original; an image given as bytes gives PNG bytes. A repeated image is cut once. A sample without
images is left as it is (Data-Juicer's op fails on one).
"""
from __future__ import annotations

import io
import os

from pydantic import Field, field_validator

from ... import models as store
from ...core import trust
from ...core.resources import Resources
from ...media import inference as inf
from ...media.image import load_rgb
from ...media.inference import is_path, model_location
from ...media.paths import digest, produced_path, write_atomic
from ...registry import register
from ..base import Mapper
from ._common import ImageParams
from ._produce import map_images

U2NET = "u2net.onnx"


def save_png(img, source, op_name: str, save_dir: str | None, config: dict, data=None):
    """``img`` as PNG: a new ``.png`` file beside ``source`` (a path), or PNG bytes (``source`` is bytes)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        return buf.getvalue()
    if isinstance(data, (bytes, bytearray, memoryview)):
        config = {**config, "source_bytes": digest(bytes(data))}
    path = os.path.splitext(produced_path(source, op_name, save_dir, config))[0] + ".png"
    write_atomic(path, lambda tmp: img.save(tmp, format="PNG"))
    return path


def rembg_session(path: str, device: str):
    """rembg's u2net_custom session on ``path`` (a file the trust policy already let through: rembg itself
    accepts only files under its own model directory), on CUDA when asked and onnxruntime has it."""
    import onnxruntime as ort
    from rembg.sessions.u2net_custom import U2netCustomSession

    class Session(U2netCustomSession):
        @classmethod
        def download_models(cls, *args, **kwargs):
            return kwargs["model_path"]

    cuda = device in ("auto", "cuda") or device.startswith("cuda:")
    providers = (["CUDAExecutionProvider", "CPUExecutionProvider"]
                 if cuda and "CUDAExecutionProvider" in ort.get_available_providers() else ["CPUExecutionProvider"])
    opts = ort.SessionOptions()
    if inf.model_threads():
        opts.intra_op_num_threads = inf.model_threads()
    return Session("u2net_custom", opts, model_path=path, providers=providers)


def cut_out(session, img, **kw):
    """``rembg.remove`` with ``session``: the RGBA cut-out of a PIL image."""
    from rembg import remove
    return remove(img, session=session, **kw)


def load_session(ref: str, device: str):
    path = model_location(ref)
    if not os.path.isfile(path):
        raise ValueError(f"model_path {ref}: not an ONNX file")
    return rembg_session(path, device)


@register("image_remove_background_mapper")
class ImageRemoveBackgroundMapper(Mapper):
    """Remove the background of each image (rembg on a U2Net-style ONNX model): the cut-out, an RGBA PNG, is
    written as a new file (bytes stay bytes) and the sample points at it; ``__dj__source_file__`` keeps the
    original paths."""

    requires = ("PIL", "onnxruntime", "rembg")
    resources = Resources(memory=1 * 2**30)
    inputs = ("{image_key}",)
    outputs = ("{image_key}", "__dj__source_file__")
    version = 1

    class Params(ImageParams):
        alpha_matting: bool = Field(False, description="Refine the mask edges with alpha matting.")
        alpha_matting_foreground_threshold: int = Field(240, description="Alpha matting: mask values above "
                                                                         "this are sure foreground.")
        alpha_matting_background_threshold: int = Field(10, description="Alpha matting: mask values below "
                                                                        "this are sure background.")
        alpha_matting_erode_size: int = Field(10, description="Alpha matting: erosion of the sure regions.")
        bgcolor: tuple[int, int, int, int] | None = Field(None, description="RGBA colour put behind the "
                                                                             "cut-out (default: transparent).")
        save_dir: str | None = trust.path_param(
            "write", None, description="Directory for the new images (default: Data-Juicer's "
                                       "__dj__produced_data__/<op> beside each source, or "
                                       "$DJ_PRODUCED_DATA_DIR/<op>).")
        model_path: str = trust.path_param(
            "model", U2NET, description="U2Net-style ONNX model for rembg's u2net_custom session: a file, or a "
                                        "model-store name (gristmill).")
        device: str = Field("auto", description="'auto' (CUDA when onnxruntime has it, else CPU), "
                                                "'cpu', 'cuda' (gristmill).")

        @field_validator("bgcolor", mode="before")
        @classmethod
        def _bgcolor(cls, v):
            if v is not None and (len(v) != 4 or any(not 0 <= int(c) <= 255 for c in v)):
                raise ValueError(f"bgcolor must be 4 integers in 0..255 (R, G, B, A), got {v!r}")
            return v

    def __init__(self, **params):
        super().__init__(**params)
        ref = self.params.model_path
        if not is_path(ref) and store.checking() and store.find(ref) is None:
            raise store.ModelMissing(
                f"model_path: model {ref!r} is not in the model store {store.store_name()}: run `gristmill models "
                f"add {ref} FILE` with FILE a U2Net ONNX file (rembg's u2net.onnx release), or set model_path to one")
        if is_path(ref):
            trust.check_read(ref, "model_path")
            if not os.path.isfile(os.path.expanduser(ref)):
                raise ValueError(f"model_path: {ref}: no such file")

    def models(self) -> list[str]:
        return [] if is_path(self.params.model_path) else [self.params.model_path]

    def _config(self) -> dict:
        return {"op": self.name, **self.params.model_dump(exclude={"save_dir", "text_key", "image_bytes_key",
                                                                    "device"})}

    def process_batch(self, batch):
        p = self.params
        self.check_inputs(batch)
        cfg = self._config()
        kw = dict(alpha_matting=p.alpha_matting,
                  alpha_matting_foreground_threshold=p.alpha_matting_foreground_threshold,
                  alpha_matting_background_threshold=p.alpha_matting_background_threshold,
                  alpha_matting_erode_size=p.alpha_matting_erode_size,
                  bgcolor=tuple(p.bgcolor) if p.bgcolor is not None else None)

        def cut(v, data):
            session = self.resource("rembg", lambda: load_session(p.model_path, p.device))
            return save_png(cut_out(session, load_rgb(data), **kw), v, self.name, p.save_dir, cfg, data)
        return map_images(self, batch, p.image_key, cut, p.image_bytes_key)
