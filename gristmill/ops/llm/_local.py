"""Data-Juicer's ``is_hf_model: true``: the chat model loaded in the worker with transformers (the ``models``
extra) instead of asked over HTTP. A local directory, or an ``org/name`` the model store holds
(``gristmill models add org/name DIR``); nothing is downloaded. As in Data-Juicer, generation is a
text-generation pipeline called with the messages (``return_full_text: false``) and the sampling params,
``max_new_tokens`` defaulting to the model's generation config, else 512."""
from __future__ import annotations

import json
import os


def model_path(name: str) -> str:
    if os.path.isdir(name):
        return name
    from ... import models
    return models.resolve(name)


def max_new_tokens(path: str, sampling: dict) -> dict:
    out = dict(sampling)
    if "max_new_tokens" not in out:
        try:
            with open(os.path.join(path, "generation_config.json"), encoding="utf-8") as f:
                cfg = json.load(f)
        except (OSError, ValueError):
            cfg = {}
        out["max_new_tokens"] = cfg.get("max_new_tokens") or cfg.get("max_tokens") or 512
    return out


class LocalChat:
    """``chat(messages) -> str`` with a transformers text-generation pipeline on the CPU (or the GPU a
    ``device`` model param names)."""

    def __init__(self, name: str, model_params: dict, sampling: dict):
        try:
            import transformers
        except ImportError:
            raise RuntimeError("is_hf_model needs transformers and torch: pip install 'gristmill[models]'") from None
        self.path = model_path(name)
        kw = {k: v for k, v in (model_params or {}).items() if k in ("device", "torch_dtype", "dtype")}
        self.pipe = transformers.pipeline("text-generation", model=self.path, tokenizer=self.path,
                                          trust_remote_code=False, **kw)
        self.sampling = max_new_tokens(self.path, sampling or {})

    def chat(self, messages: list[dict]) -> str:
        out = self.pipe(messages, return_full_text=False, **self.sampling)
        return out[0]["generated_text"]
