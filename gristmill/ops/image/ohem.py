"""``image_ohem_selector``: Data-Juicer's online hard example mining: a user's loss function scores every
sample from its images (and optionally a model it builds), the loss is kept in ``stats[loss_field]`` and the
``top_ratio`` / ``topk`` samples with the highest loss are kept (the smaller when both are set).

The user code is a Python file (``score_file``, its ``score_function`` and optional ``model_function``) or,
from Python, the callables ``score_fn`` / ``model_factory``: ``score_fn(model, samples, images, device,
**score_kwargs)`` gets ``batch_size`` samples (dicts), their images (per sample a list of RGB
``PIL.Image``: the bytes of ``image_bytes_key`` where present, else the file) and returns one finite loss per
sample (a list, numpy array or tensor); ``model_factory(**model_kwargs)`` runs once per worker and the model is
moved to ``device`` (``auto``: CUDA when the user code has imported torch and it sees a GPU) and put in eval mode. Like ``python_file_mapper``
it runs code of the recipe's, so a recipe must allow scripts.

Scoring runs in the stage before the selection (per batch, on the workers), the selection over the whole
dataset without the driver reading the losses (the selectors' radix search). Ties keep dataset order, as
Data-Juicer's ``heapq.nlargest`` does. Unlike Data-Juicer, the kept samples stay in dataset order (Data-Juicer
returns them by descending loss), and the removed ones go to the removed output with their loss."""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...media import IMAGE_BYTES_KEY, IMAGE_KEY, media_values
from ...registry import register
from ..base import Params, Selector
from ..select._kth import _select_smallest


def _name(fn) -> str | None:
    return None if fn is None else f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


@register("image_ohem_selector")
class ImageOHEMSelector(Selector):
    """Keep the highest-loss image samples (online hard example mining) under a user-supplied loss function;
    the loss of every sample goes to ``stats[loss_field]``."""

    is_script = True
    requires = ("PIL",)
    inputs = ("{image_key}?",)

    class Params(Params):
        score_fn: Any = Field(None, description="From Python: the loss function (else score_file).")
        model_factory: Any = Field(None, description="From Python: builds the model passed to score_fn.")
        score_file: str = trust.path_param("read", "", description="Python file defining the loss function.")
        score_function: str = Field("score_fn", description="Name of the loss function in score_file.")
        model_function: str = Field("model_factory", description="Name of the model factory in score_file "
                                    "(optional there).")
        top_ratio: float | None = Field(None, ge=0, le=1, description="Fraction of samples to keep.")
        topk: int | None = Field(None, ge=0, description="Number of samples to keep.")
        batch_size: int = Field(8, gt=0, description="Samples per score_fn call.")
        image_key: str = Field(IMAGE_KEY, description="Field with each sample's images.")
        image_bytes_key: str = Field(IMAGE_BYTES_KEY, description="Field with image bytes parallel to image_key.")
        loss_field: str = Field("image_ohem_loss", description="Stats key of the loss.")
        device: str = Field("auto", description="Device handed to score_fn and the model (auto: cuda if available).")
        model_kwargs: dict | None = Field(None, description="Keyword arguments of model_factory.")
        score_kwargs: dict | None = Field(None, description="Extra keyword arguments of score_fn.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        if p.top_ratio is None and p.topk is None:
            raise ValueError(f"{self.name}: at least one of top_ratio or topk must be specified")
        if p.score_file:
            if not p.score_file.endswith(".py"):
                raise ValueError(f"{self.name}: score_file must be a Python file (.py): {p.score_file}")
        elif not callable(p.score_fn):
            raise ValueError(f"{self.name}: score_fn or a score_file containing a callable score_fn is required")
        if p.model_factory is not None and not callable(p.model_factory):
            raise ValueError(f"{self.name}: model_factory must be callable or None")

    def config(self) -> dict:
        cfg = super().config()
        cfg["params"]["score_fn"] = _name(self.params.score_fn)
        cfg["params"]["model_factory"] = _name(self.params.model_factory)
        return cfg

    def _functions(self):
        def load():
            p = self.params
            if not p.score_file:
                return p.score_fn, p.model_factory
            path = os.path.abspath(p.score_file)
            if not os.path.isfile(path):
                raise ValueError(f"{self.name}: score_file must be an existing Python file: {path}")
            name = f"gristmill_ohem_{abs(hash(path)):x}"
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ValueError(f"{self.name}: cannot load a Python module from score_file {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except Exception:
                sys.modules.pop(name, None)
                raise
            fn = getattr(module, p.score_function, None)
            if not callable(fn):
                raise ValueError(f"{self.name}: function {p.score_function!r} not found in {path}")
            factory = getattr(module, p.model_function, None)
            return fn, (factory if callable(factory) else p.model_factory)
        return self.resource("functions", load)

    def _device(self) -> str:
        if self.params.device != "auto":
            return self.params.device
        self._functions()  # a score file that uses torch has imported it by now; gristmill never imports it
        torch = sys.modules.get("torch")
        return "cuda" if torch is not None and torch.cuda.is_available() else "cpu"

    def _model(self):
        def make():
            _, factory = self._functions()
            if factory is None:
                return None
            model = factory(**(self.params.model_kwargs or {}))
            if hasattr(model, "to"):
                model.to(self._device())
            if hasattr(model, "eval"):
                model.eval()
            return model
        return self.resource("model", make)

    def losses(self, batch: pa.RecordBatch) -> list[float]:
        from ...media.image import load_rgb
        p = self.params
        fn, _ = self._functions()
        model, device = self._model(), self._device()
        rows = C.to_pylist(batch)
        items = media_values(batch, p.image_key, p.image_bytes_key)
        out: list[float] = []
        for start in range(0, len(rows), p.batch_size):
            samples = rows[start:start + p.batch_size]
            images = [[load_rgb(x) for x in r] for r in items[start:start + p.batch_size]]
            got = fn(model, samples, images, device, **(p.score_kwargs or {}))
            if hasattr(got, "detach"):
                got = got.detach().cpu().reshape(-1).tolist()
            vals = np.asarray(got, dtype=float).reshape(-1)
            if len(vals) != len(samples):
                raise ValueError(f"{self.name}: score_fn must return exactly one loss per sample "
                                 f"(got {len(vals)} for {len(samples)})")
            if not np.isfinite(vals).all():
                raise ValueError(f"{self.name}: score_fn returned NaN or infinite loss")
            out += vals.tolist()
        return out

    def prepare(self, batch):
        if not batch.num_rows:
            return C.with_stats(batch, {self.params.loss_field: pa.array([], pa.float64())})
        return C.with_stats(batch, {self.params.loss_field: pa.array(self.losses(batch), pa.float64())})

    # the selection: the k smallest of -loss (ties in dataset order)
    def resolve_columns(self):
        return [f"{C.STATS}"]

    def _key_column(self) -> str:
        return C.STATS

    def _order_keys(self, col: pa.Array) -> np.ndarray:
        v = pc.struct_field(col, self.params.loss_field) if pa.types.is_struct(col.type) else col
        v = -pc.fill_null(v, -np.inf).to_numpy(zero_copy_only=False).astype(float) + 0.0
        b = v.view(np.uint64)
        return np.where(b >> np.uint64(63) == 1, ~b, b | np.uint64(1 << 63))

    def resolve(self, ctx):
        p = self.params
        _select_smallest(ctx, self, p.top_ratio, p.topk, lambda k: f"not in the {k} highest {p.loss_field}")
        return None
