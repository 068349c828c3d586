"""What the video ops that run a user-supplied export (ONNX, TorchScript) share: the model param names a local
file or a file in the model store (``NAME.onnx`` / ``NAME.torchscript.pt``: ``gristmill models add NAME FILE``),
checked when the op is built and declared to the store; never downloaded. onnxruntime and torch are imported
inside functions."""
from __future__ import annotations

import os

from ... import models as store
from ...core import trust
from ...media import inference as inf


def is_local(ref: str) -> bool:
    """A path (absolute, ``~``/``.``-relative, with a directory part, or an existing file), not a store name."""
    return ref.startswith(("/", "~", ".")) or "/" in ref or os.path.sep in ref or os.path.isfile(ref)


def store_names(ref: str) -> list[str]:
    return [] if not ref or is_local(ref) else [ref]


def check_file(ref: str, param: str, what: str) -> None:
    """Refuse, before any work, a model param that names no file here and no file in the model store."""
    if not ref:
        raise ValueError(f"{param}: required ({what})")
    if is_local(ref):
        trust.check_read(ref, param)
        if store.checking() and not os.path.isfile(os.path.expanduser(ref)):
            raise ValueError(f"{param}: {ref}: no such file ({what})")
    elif store.checking() and store.find(ref) is None:
        raise store.ModelMissing(f"{param}: model {ref!r} is not in the model store {store.store_name()}: run "
                                 f"`gristmill models add {ref} FILE` with FILE {what}, or set {param} to that file")


def model_file(ref: str, param: str = "model") -> str:
    return os.path.expanduser(trust.check_read(ref, param)) if is_local(ref) else store.resolve(ref)


def onnx_session(path: str, device: str):
    """An onnxruntime session on ``device`` (``auto``: CUDA when onnxruntime has it, else the CPU)."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    if inf.model_threads():
        opts.intra_op_num_threads = inf.model_threads()
    avail = ort.get_available_providers()
    cuda = device.startswith("cuda") or (device == "auto" and "CUDAExecutionProvider" in avail)
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if cuda else ["CPUExecutionProvider"]
    return ort.InferenceSession(path, opts, providers=[p for p in providers if p in avail] or None)


def is_onnx(path: str) -> bool:
    return path.lower().endswith(".onnx")
