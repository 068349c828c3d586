"""LLaVA-style conversation JSON (``[{"id", "image", "conversations": [{"from", "value"}, ...]}]``) read as
Data-Juicer samples, with the semantics of Data-Juicer's ``llava_to_dj.py`` conversion: each (human,
robot) round becomes ``[[human]]: question\\n[[gpt]]: answer``, rounds joined by ``\\n`` (or each its own
chunk ending in the eoc token with ``llava_split_chunk``), an eoc token at the end, the image in
``images`` (once, or once per round with ``llava_image_broadcast``, the image token then inserted into
each later question), only ``<image>\\ncaption`` with ``llava_only_keep_caption``. The image path is
resolved against ``llava_image_folder`` (LLaVA's image folder) or else the JSON file's directory.

Where the conversion draws at random (``llava_image_broadcast_pos: random``) the draw is a hash of the
sample id, so reruns give the same text. A sample the conversion refuses (odd number of turns, image token
neither first nor last in the first question) is a reject, not the end of the run. Items are streamed
(ijson), never the whole file in memory. Read only when asked: ``input_format: llava``.
"""
from __future__ import annotations
from .. import fs as _fs

import hashlib

from ..core import columns as C
from ..core.accounting import Reject
from . import _media as M
from .base import Reader, register_reader, with_ids
from ..media.paths import resolve_relative

ROLE = "[[%s]]: "
OPTIONS = {
    "llava_image_folder": "llava: directory the 'image' paths are relative to (default: the JSON file's)",
    "llava_split_chunk": "llava: each conversation round its own chunk (default false)",
    "llava_image_broadcast": "llava: the image token in every round's question (needs llava_split_chunk)",
    "llava_image_broadcast_pos": "llava: before | after | random | follow (default random)",
    "llava_image_special_token": "llava: the image token in the source (default <image>)",
    "llava_eoc_special_token": "llava: chunk end token (default <|__dj__eoc|>)",
    "llava_add_eoc_at_last": "llava: eoc token at the end of the text (default true)",
    "llava_sent_separator": "llava: separator between sentences (default newline)",
    "llava_only_keep_caption": "llava: keep only '<image>\\ncaption' (pretraining data; default false)",
}


def _flag(v) -> bool:
    return v if isinstance(v, bool) else str(v).lower() in ("true", "1", "yes")


class LlavaError(ValueError):
    pass


def convert(sample: dict, o: dict) -> dict:
    """One LLaVA item as a Data-Juicer sample (``o``: the options with their defaults)."""
    sid = str(sample["id"])
    image = sample.get("image", "")
    conv = sample.get("conversations") or []
    if len(conv) % 2:
        raise LlavaError(f"sample {sid}: unbalanced (human, robot) rounds ({len(conv)} turns)")
    tok, sep = o["image_token"], o["sep"]
    images, first_pos, out = [], "", []
    for i in range(len(conv) // 2):
        h, r = conv[2 * i], conv[2 * i + 1]
        q, a = h["value"], r["value"]
        if image == "":
            pass
        elif i == 0:
            if q.startswith(tok):
                first_pos = "before"
            elif q.endswith(tok):
                first_pos = "after"
            else:
                raise LlavaError(f"sample {sid}: the image token {tok!r} is neither at the start nor at the "
                                 "end of the first question")
            images.append(image)
        elif o["broadcast"]:
            pos = o["broadcast_pos"]
            if pos == "random":
                pos = "before" if hashlib.sha256(f"{sid}:{i}".encode()).digest()[0] < 128 else "after"
            elif pos == "follow":
                pos = first_pos
            q = tok + sep + q if pos == "before" else q + sep + tok
            images.append(image)
        out.append(tok + sep + a if o["only_caption"] else ROLE % h["from"] + q + sep + ROLE % r["from"] + a)
    join = f" {o['eoc']}{sep}" if o["split_chunk"] else sep
    text = join.join(out)
    if o["eoc_last"]:
        text += f" {o['eoc']}"
    return {C.ID: sid, "text": text, "images": images}


@register_reader
class LlavaReader(Reader):
    name = "llava"
    extensions = ()
    options = OPTIONS

    def _options(self, opts) -> dict:
        p = opts.param
        o = {"split_chunk": _flag(p("llava_split_chunk", False)), "broadcast": _flag(p("llava_image_broadcast", False)),
             "broadcast_pos": p("llava_image_broadcast_pos", "random"),
             "image_token": p("llava_image_special_token", "<image>"),
             "eoc": p("llava_eoc_special_token", M.media_keys(opts)["eoc_token"]),
             "eoc_last": _flag(p("llava_add_eoc_at_last", True)), "sep": p("llava_sent_separator", "\n"),
             "only_caption": _flag(p("llava_only_keep_caption", False))}
        if o["broadcast"] and not o["split_chunk"]:
            raise ValueError("llava_image_broadcast needs llava_split_chunk: true")
        if o["broadcast_pos"] not in ("random", "before", "after", "follow"):
            raise ValueError("llava_image_broadcast_pos must be one of random, before, after, follow")
        return o

    def read(self, shard, opts):
        import ijson
        o = self._options(opts)
        keys = M.media_keys(opts)
        base = opts.param("llava_image_folder") or M.file_dir(shard.source)
        rows, positions = [], []
        i = 0
        try:
            with _fs.open_input(shard.source) as f:
                for item in ijson.items(f, "item", use_float=True):
                    try:
                        row = convert(item, o)
                    except (LlavaError, KeyError, TypeError, AttributeError) as e:
                        msg = str(e) if isinstance(e, LlavaError) else f"not a LLaVA item ({type(e).__name__}: {e})"
                        yield Reject("read", type(e).__name__, msg, row={"raw": str(item)[:2000]},
                                     source=shard.source, offset=i)
                        i += 1
                        continue
                    row[opts.text_key] = row.pop("text")
                    row[keys["image_key"]] = [resolve_relative(p, base) for p in row.pop("images")]
                    rows.append(row)
                    positions.append(i)
                    i += 1
                    if len(rows) >= opts.batch_size:
                        yield with_ids(C.from_records(rows, strings=(opts.text_key,)), shard, positions, opts)
                        rows, positions = [], []
        except (ijson.JSONError, OSError) as e:
            if rows:
                yield with_ids(C.from_records(rows, strings=(opts.text_key,)), shard, positions, opts)
                rows, positions = [], []
            yield Reject("read", type(e).__name__, f"LLaVA JSON unreadable after item {i}: {e}",
                         source=shard.source, offset=i)
        if rows:
            yield with_ids(C.from_records(rows, strings=(opts.text_key,)), shard, positions, opts)
