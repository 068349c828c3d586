"""image_tagging_mapper (Data-Juicer's) and the Recognize Anything (RAM++) tagger it shares with the video tagging
ops. Data-Juicer loads ``ram_plus_swin_large_14m.pth`` (its model host serves it: ``gristmill models fetch
ram_plus_swin_large_14m.pth``) with the ``recognize-anything`` package, which is not on PyPI. gristmill loads
``model_path`` (default that store name; or a file path) in one of two ways:

- with the ``ram`` package installed (``pip install git+https://github.com/xinyu1205/recognize-anything``):
  ``ram.models.ram_plus(pretrained=..., image_size=384, vit="swin_l")`` and ``generate_tag``, Data-Juicer's
  own route;
- a TorchScript export (``torch.jit.save``) with the interface ``forward(images: Tensor) -> List[str]``: the
  input is a float32 batch ``(N, 3, 384, 384)``, RGB resized to 384×384 (bilinear) and normalised with the
  ImageNet mean/std (RAM's ``get_transform(384)``); the output one string per image, its tags joined by
  ``" | "`` (what ``generate_tag`` returns). Export one by wrapping ``generate_tag`` in a module and scripting
  or tracing it.

Tags per image are the words of that string, stripped, most frequent first (ties in first-seen order, as
Python's ``Counter.most_common``). Images are tagged ``batch_size`` at a time (RAM thresholds each image on its
own, so batching does not change the tags)."""
from __future__ import annotations

import collections
import os

import numpy as np
import pyarrow as pa
from pydantic import Field

from ... import models as store
from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import inference as inf
from ...media import media_values
from ...registry import register
from ..base import Mapper
from ._common import ImageParams
from .model_clip import rgb

RAM_MODEL = "ram_plus_swin_large_14m.pth"
RAM_SIZE = 384
_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
_STD = np.array([0.229, 0.224, 0.225], np.float32)


def ram_tensor(images: list):
    """RAM's ``get_transform(384)`` on PIL images, as one float32 batch."""
    import torch
    from PIL import Image
    arrs = [(np.asarray(im.convert("RGB").resize((RAM_SIZE, RAM_SIZE), Image.BILINEAR), np.float32) / 255.0 - _MEAN)
            / _STD for im in images]
    return torch.from_numpy(np.stack(arrs).transpose(0, 3, 1, 2).copy())


def is_local(ref: str) -> bool:
    return ref.startswith(("/", "~", ".")) or os.path.sep in ref or os.path.isfile(ref)


def model_file(ref: str) -> str:
    return os.path.expanduser(trust.check_read(ref, "model_path")) if is_local(ref) else store.resolve(ref)


class RamTagger:
    """``tags(images) -> list of "a | b | c" strings``, through the ``ram`` package or a TorchScript export."""

    def __init__(self, ref: str, device: str, batch_size: int):
        import torch
        if inf.model_threads():
            torch.set_num_threads(inf.model_threads())
        path, dev = model_file(ref), inf.pick_device(device)
        self.batch_size = batch_size
        try:
            self.script = torch.jit.load(path, map_location=dev).eval()
        except (RuntimeError, ValueError):
            self.script = None
        self.device = dev
        if self.script is not None:
            return
        try:
            import ram  # the recognize-anything package (GitHub only)
        except ImportError:
            raise ValueError(f"model_path {ref}: not a TorchScript export, and loading a RAM++ checkpoint needs the "
                             f"recognize-anything package: pip install "
                             f"git+https://github.com/xinyu1205/recognize-anything") from None
        self.model = ram.models.ram_plus(pretrained=path, image_size=RAM_SIZE, vit="swin_l").to(dev).eval()
        self.transform = ram.get_transform(image_size=RAM_SIZE)

    def tags(self, images: list, load=None) -> list[str]:
        """One tag string per image (PIL images, or items that ``load`` turns into them)."""
        import torch
        out: list[str] = []
        with torch.inference_mode():
            for part in inf.chunks(images, self.batch_size, load):
                if self.script is not None:
                    out += list(self.script(ram_tensor(part).to(self.device)))
                else:
                    x = torch.stack([self.transform(im) for im in part]).to(self.device)
                    out += list(self.model.generate_tag(x)[0])
        return out


def words(tag_strings: list[str]) -> list[str]:
    """Data-Juicer's tag list: every ``|``-separated word, stripped, most frequent first."""
    counts = collections.Counter(w.strip() for s in tag_strings for w in s.split("|"))
    return [w for w, _ in counts.most_common()]


class TaggerOp:
    """Mixin: the ``model_path`` param checked, declared to the store, loaded once per worker."""

    requires = ("PIL", "torch")
    resources = Resources(memory=9 * 2**30)

    def __init__(self, **params):
        super().__init__(**params)
        ref = self.params.model_path
        if is_local(ref):
            trust.check_read(ref, "model_path")
            if not os.path.isfile(os.path.expanduser(ref)):
                raise ValueError(f"model_path: {ref}: no such file")
        elif store.checking() and store.find(ref) is None:
            raise store.ModelMissing(f"model_path: model {ref!r} is not in the model store {store.store_name()}: run "
                                     f"`gristmill models fetch {ref}` (Data-Juicer's host) or `gristmill models add "
                                     f"{ref} FILE`, or set model_path to a TorchScript export")

    def models(self) -> list[str]:
        return [] if is_local(self.params.model_path) else [self.params.model_path]

    def tagger(self) -> RamTagger:
        p = self.params
        return self.resource("ram", lambda: RamTagger(p.model_path, p.device, p.batch_size))


class TaggerParams(ImageParams):
    model_path: str = trust.path_param("model", RAM_MODEL, description="RAM++ checkpoint (a model-store name, "
                                       "with the recognize-anything package) or a TorchScript export file "
                                       "(gristmill).")
    device: str = Field("auto", description="Torch device: 'auto' (CUDA when a GPU is visible, else CPU), "
                                            "'cpu', 'cuda:1'...")
    batch_size: int = Field(16, ge=1, description="Images per model call (gristmill).")


@register("image_tagging_mapper")
class ImageTaggingMapper(TaggerOp, Mapper):
    """Tag each image with Recognize Anything (RAM++): per image, its tags most frequent first, in meta
    ``tag_field_name`` (a list per image; a sample without images gets one empty list, as in Data-Juicer)."""

    inputs = ("{image_key}",)
    outputs = ("meta.{tag_field_name}",)
    version = 1

    class Params(TaggerParams):
        tag_field_name: str = Field("image_tags", description="Meta key of the tags.")

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        p = self.params
        self.check_inputs(batch)
        old = C.get_meta(batch, p.tag_field_name)
        have = old.to_pylist() if old is not None else [None] * batch.num_rows
        rows = media_values(batch, p.image_key, p.image_bytes_key)
        todo = [v for r, items in enumerate(rows) if have[r] is None for v in items]
        uniq = list(dict.fromkeys(todo))
        got = dict(zip(uniq, self.tagger().tags(uniq, rgb))) if uniq else {}
        out = [have[r] if have[r] is not None else ([words([got[v]]) for v in items] if items else [[]])
               for r, items in enumerate(rows)]
        return C.with_meta(batch, {p.tag_field_name: pa.array(out, pa.list_(pa.list_(pa.string())))})
