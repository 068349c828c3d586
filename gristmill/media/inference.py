"""Model-based media ops share this: where a model comes from, which device it runs on, batched inference.

- A model param (Data-Juicer's ``hf_clip``, ``hf_nsfw_model``...) is a local directory (what
  ``save_pretrained`` wrote) or a Hugging Face repo id (``openai/clip-vit-base-patch32``) that must be in the
  model store (``gristmill models add openai/clip-vit-base-patch32 DIR``). Nothing is downloaded: an op
  declares the store names it needs (``store_names``), so a missing one stops the recipe before any work.
- Under the service's trust policy (``core/trust.py``) a local model directory must lie in its data roots
  (``check_ref`` at build time, ``model_dir`` again at load time), and ``trust_remote_code`` reaches
  transformers only through ``trust.remote_code_allowed`` (False unless asked for; refused without
  ``--allow-scripts``): every loader passes it explicitly.
- ``device: auto`` is CUDA when torch sees a GPU, else the CPU.
- Inference runs over all the images of a batch at once, in chunks of ``batch_size`` (``chunks``).

torch and transformers are imported inside functions: op modules must import cheaply.
"""
from __future__ import annotations

import os
import re

from .. import models as store
from ..core import trust

_PATHLIKE = re.compile(r"^(?:[/~.]|[A-Za-z]:[\\/])")


def is_local(ref: str) -> bool:
    """True when ``ref`` names a local path (absolute, ``~``/``.``-relative, or an existing directory)."""
    return bool(_PATHLIKE.match(ref)) or os.path.isdir(ref)


def store_names(ref: str) -> list[str]:
    """The model-store names a model param needs: ``[ref]`` for a repo id, ``[]`` for a local directory."""
    return [] if is_local(ref) else [ref]


def check_ref(ref: str, param: str) -> None:
    """Refuse, before any work starts, a model param that names neither a local directory nor a store entry."""
    if is_local(ref):
        trust.check_read(ref, param)  # before looking: outside the roots says nothing about what is there
        path = os.path.expanduser(ref)
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise ValueError(f"{param}: {ref} is not a model directory (no config.json there); give a directory "
                             f"written by save_pretrained / `huggingface-cli download --local-dir`")
        return
    if not store.is_hf_dir_name(ref):
        raise ValueError(f"{param}: {ref!r} is neither a local model directory nor a Hugging Face repo id "
                         f"(owner/name)")
    if store.checking() and store.find(ref) is None:
        raise store.ModelMissing(f"{param}: model {ref!r} is not in the model store {store.store_dir()}: run "
                                 f"`gristmill models add {ref} DIR` with DIR from `huggingface-cli download {ref} "
                                 f"--local-dir DIR`, or set {param} to a local model directory")


def model_dir(ref: str) -> str:
    """The local directory of model ``ref`` (a path, or a repo id looked up in the store); a path is checked
    against the trust policy again here, for a ref that did not come through an op's declared params."""
    if is_local(ref):
        return os.path.expanduser(trust.check_read(ref, "model"))
    return store.resolve(ref)


def is_path(ref: str) -> bool:
    """A model param naming a file or directory here (``is_local``, a path with a separator, or an existing
    entry) rather than a model-store name."""
    return is_local(ref) or os.path.sep in ref or os.path.exists(ref)


def model_location(ref: str, param: str = "model_path") -> str:
    """The local file or directory of model param ``param``: a path (checked against the trust policy) or a
    model-store entry."""
    if is_path(ref):
        return os.path.expanduser(trust.check_read(ref, param))
    return store.resolve(ref)


def model_threads() -> int | None:
    """CPU threads a model may use (torch, onnxruntime): ``$GRISTMILL_MODEL_THREADS`` when set, else the
    libraries' own default (all cores: with several workers per machine, set it to cores / workers)."""
    v = os.environ.get("GRISTMILL_MODEL_THREADS")
    return max(1, int(v)) if v else None


def pick_device(device: str) -> str:
    """``auto`` → ``cuda`` when torch sees a GPU, else ``cpu``; anything else is passed to torch as is."""
    if device != "auto":
        return device
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_torchscript(path: str, device: str):
    """``(module, device)``: the TorchScript export at ``path`` in eval mode on ``pick_device(device)``, torch
    held to ``model_threads()``; torch's own error (RuntimeError, ValueError) for a file that is not one."""
    import torch
    if model_threads():
        torch.set_num_threads(model_threads())
    dev = pick_device(device)
    return torch.jit.load(path, map_location=dev).eval(), dev


def _quiet_transformers() -> None:
    import transformers
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def load_hf(ref: str, device: str, trust_remote_code: bool = False, model_class=None):
    """(model, processor) from a model directory, as Data-Juicer builds them: ``AutoProcessor`` and the
    class the config names (``architectures[0]``) unless ``model_class`` is given; eval mode, on ``device``.
    ``trust_remote_code`` goes through the trust policy (refused without ``--allow-scripts``) and is always
    passed to transformers explicitly."""
    import torch
    import transformers
    _quiet_transformers()
    if model_threads():
        torch.set_num_threads(model_threads())
    kw = {"local_files_only": True, "trust_remote_code": trust.remote_code_allowed(trust_remote_code)}
    path = model_dir(ref)
    processor = transformers.AutoProcessor.from_pretrained(path, **kw)
    if model_class is None:
        config = transformers.AutoConfig.from_pretrained(path, **kw)
        names = getattr(config, "architectures", None) or []
        if not names or not hasattr(transformers, names[0]):
            raise ValueError(f"{path}: config.json names no transformers model class (architectures={names})")
        model_class = getattr(transformers, names[0])
    model = model_class.from_pretrained(path, **kw)
    model.eval()
    return model.to(pick_device(device)), processor


def chunks(items: list, size: int, load=None):
    """``items`` in consecutive slices of at most ``size`` (the inference batch), each item passed through
    ``load`` when given: images are decoded one model call at a time, so a batch of large images is never
    all in memory at once."""
    size = max(1, int(size))
    for i in range(0, len(items), size):
        part = items[i:i + size]
        yield [load(x) for x in part] if load is not None else part


def features(out):
    """A model's ``get_*_features`` result as a tensor (transformers 5 returns an output object)."""
    return out if hasattr(out, "shape") else out.pooler_output
