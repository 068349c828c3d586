"""Tiny, randomly initialised models written with ``save_pretrained`` (what users point ``hf_*`` params at),
test images drawn with Pillow, and a helper that applies one op through the fused executor."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from gristmill.core.fused import FusedOp
from gristmill.registry import create_op


def byte_chars() -> list[str]:
    """CLIP's byte → printable character table (GPT-2 style): printable bytes map to themselves, the rest to
    code points from 256 up."""
    keep = set(range(33, 127)) | set(range(161, 173)) | set(range(174, 256))
    out, extra = [], 0
    for b in range(256):
        if b in keep:
            out.append(chr(b))
        else:
            out.append(chr(256 + extra))
            extra += 1
    return out


def write_clip_tokenizer(d: Path):
    """A character-level CLIP BPE tokenizer (no merges): every byte and its end-of-word form, plus
    CLIP's start/end tokens."""
    from transformers import CLIPTokenizer
    chars = byte_chars()
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({c + "</w>": 256 + i for i, c in enumerate(chars)})
    vocab["<|startoftext|>"], vocab["<|endoftext|>"] = 512, 513
    (d / "vocab.json").write_text(json.dumps(vocab))
    (d / "merges.txt").write_text("#version: 0.2\n")
    return CLIPTokenizer(str(d / "vocab.json"), str(d / "merges.txt")), vocab


def clip_config(vocab, projection_dim=16):
    from transformers import CLIPConfig
    text = dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=2, max_position_embeddings=77, bos_token_id=vocab["<|startoftext|>"],
                eos_token_id=vocab["<|endoftext|>"], pad_token_id=vocab["<|endoftext|>"])
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                  image_size=32, patch_size=8)
    return CLIPConfig(text_config=text, vision_config=vision, projection_dim=projection_dim)


def clip_image_processor():
    from transformers import CLIPImageProcessor
    return CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})


def build_clip(d: Path, seed: int = 0) -> Path:
    """A tiny CLIP (CLIPModel + CLIPProcessor) in directory ``d``."""
    import torch
    from transformers import CLIPModel, CLIPProcessor
    d.mkdir(parents=True, exist_ok=True)
    tok, vocab = write_clip_tokenizer(d)
    CLIPProcessor(image_processor=clip_image_processor(), tokenizer=tok).save_pretrained(d)
    torch.manual_seed(seed)
    CLIPModel(clip_config(vocab)).save_pretrained(d)
    return d


def build_vit_classifier(d: Path, labels: list[str], seed: int = 0) -> Path:
    """A tiny ViTForImageClassification with ``labels`` (index order) and its image processor."""
    import torch
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor
    d.mkdir(parents=True, exist_ok=True)
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(d)
    torch.manual_seed(seed)
    cfg = ViTConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                    image_size=32, patch_size=8, id2label=dict(enumerate(labels)),
                    label2id={n: i for i, n in enumerate(labels)})
    ViTForImageClassification(cfg).save_pretrained(d)
    return d


def draw_images(d: Path, n: int, seed: int = 0) -> list[str]:
    """``n`` PNG images of different sizes: coloured rectangles and ellipses on a gradient."""
    from PIL import Image, ImageDraw
    d.mkdir(parents=True, exist_ok=True)
    rs = np.random.RandomState(seed)
    out = []
    for i in range(n):
        w, h = 40 + 7 * i, 36 + 5 * (i % 4)
        grad = np.linspace(0, 255, w, dtype=np.uint8)[None, :, None].repeat(h, 0).repeat(3, 2)
        img = Image.fromarray(grad)
        dr = ImageDraw.Draw(img)
        for _ in range(3):
            x0, y0 = rs.randint(0, w // 2), rs.randint(0, h // 2)
            box = (x0, y0, x0 + rs.randint(5, w // 2), y0 + rs.randint(5, h // 2))
            col = tuple(int(c) for c in rs.randint(0, 256, 3))
            (dr.rectangle if rs.rand() < 0.5 else dr.ellipse)(box, fill=col)
        p = d / f"img{i:02d}.png"
        img.save(p)
        out.append(str(p))
    return out


def apply(name, rows, **params):
    """Apply one op to ``rows`` through FusedOp: (kept rows, removed rows, rejects)."""
    batch = pa.RecordBatch.from_pylist(rows)
    res = FusedOp([create_op(name, params)]).run_batch(batch)
    removed = res.removed[0].to_pylist() if res.removed[0] is not None else []
    return res.batch.to_pylist(), removed, res.rejects


def write_video(path: Path, frames: list, fps: int = 10, gop: int = 10) -> str:
    """Encode RGB uint8 arrays as an H.264 MP4 (a key frame every ``gop`` frames)."""
    import av
    h, w = frames[0].shape[:2]
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=fps)
        s.width, s.height, s.pix_fmt = w, h, "yuv420p"
        s.codec_context.gop_size = gop
        s.options = {"crf": "10", "bf": "0"}
        for a in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(a, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return str(path)


def text_frame(text: str, w: int = 320, h: int = 120, size: int = 30):
    """A white frame with black text (Pillow's bundled FreeType font)."""
    from PIL import Image, ImageDraw, ImageFont
    img = Image.new("RGB", (w, h), "white")
    ImageDraw.Draw(img).text((10, h // 3), text, fill="black", font=ImageFont.load_default(size=size))
    return np.asarray(img)


def build_blip(d: Path, seed: int = 0) -> Path:
    """A tiny BlipForConditionalGeneration with a BERT word-piece tokenizer over a small vocabulary."""
    import torch
    from transformers import (BertTokenizer, BlipConfig, BlipForConditionalGeneration, BlipImageProcessor,
                              BlipProcessor)
    d.mkdir(parents=True, exist_ok=True)
    words = "a an the cat dog photo of picture red blue green square circle on with and is".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[DEC]"] + words + list("abcdefghijklmnopqrstuvwxyz")
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizer(str(d / "vocab.txt"), bos_token="[DEC]")
    BlipProcessor(image_processor=BlipImageProcessor(size={"height": 32, "width": 32}), tokenizer=tok).save_pretrained(d)
    torch.manual_seed(seed)
    text = dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=2, encoder_hidden_size=32, bos_token_id=5, pad_token_id=0, sep_token_id=3,
                eos_token_id=3, max_position_embeddings=256)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=32,
                  patch_size=8)
    BlipForConditionalGeneration(BlipConfig(text_config=text, vision_config=vision, projection_dim=16)).save_pretrained(d)
    return d
