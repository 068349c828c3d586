"""Tiny models for the image model ops of issue 29, built from configs and saved where users point the ops:
Ultralytics-style raw-head exports (TorchScript and ONNX) whose predictions are fixed, so boxes are exact; a
U2Net-interface ONNX file whose mask is the left half of the image; tiny random diffusers pipelines."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def raw_head(anchors: list[tuple], nc: int, extra: int = 0) -> np.ndarray:
    """A raw YOLO head output (1, 4 + nc + extra, A): anchors are (cx, cy, w, h, class scores...)."""
    a = np.zeros((1, 4 + nc + extra, len(anchors)), np.float32)
    for i, an in enumerate(anchors):
        a[0, :4 + nc, i] = an
    return a


def torchscript_export(path: Path, pred: np.ndarray) -> str:
    """A TorchScript module returning ``pred`` for any batch (a segmentation export also returns prototypes)."""
    import torch

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("p", torch.from_numpy(pred))

        def forward(self, x):
            return self.p.expand(x.shape[0], -1, -1) + 0 * x.mean()

    torch.jit.save(torch.jit.script(Head()), str(path))
    return str(path)


def onnx_export(path: Path, pred: np.ndarray, size: int = 64) -> str:
    """An ONNX graph with a fixed (1, 3, size, size) input returning ``pred`` (plus 0 x the input's mean) and a
    second output (mask prototypes, as a segmentation export has)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("ReduceMean", ["images"], ["m"], keepdims=0),
             helper.make_node("Mul", ["m", "zero"], ["z"]),
             helper.make_node("Add", ["pred", "z"], ["output0"]),
             helper.make_node("Identity", ["proto"], ["output1"])]
    inits = [numpy_helper.from_array(pred, "pred"), numpy_helper.from_array(np.zeros((), np.float32), "zero"),
             numpy_helper.from_array(np.zeros((1, 32, size // 4, size // 4), np.float32), "proto")]
    g = helper.make_graph(nodes, "yolo", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, size, size])],
                          [helper.make_tensor_value_info("output0", TensorProto.FLOAT, list(pred.shape)),
                           helper.make_tensor_value_info("output1", TensorProto.FLOAT, [1, 32, size // 4, size // 4])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def u2net_left_half(path: Path) -> str:
    """U2Net's interface (input.1 (1, 3, 320, 320) → (1, 1, 320, 320)): saliency 1 on the left half, 0 on the right."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    mask = np.zeros((1, 1, 320, 320), np.float32)
    mask[..., :160] = 1.0
    nodes = [helper.make_node("ReduceMean", ["input.1"], ["m"], keepdims=0),
             helper.make_node("Mul", ["m", "zero"], ["z"]),
             helper.make_node("Add", ["mask", "z"], ["d0"])]
    inits = [numpy_helper.from_array(mask, "mask"), numpy_helper.from_array(np.zeros((), np.float32), "zero")]
    g = helper.make_graph(nodes, "u2", [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 3, 320, 320])],
                          [helper.make_tensor_value_info("d0", TensorProto.FLOAT, [1, 1, 320, 320])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def _clip_tokenizer(d: Path, max_len: int = 16):
    from transformers import CLIPTokenizer
    d.mkdir(parents=True, exist_ok=True)
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1, "!": 2}
    for c in "abcdefghijklmnopqrstuvwxyz":
        vocab[c] = len(vocab)
        vocab[c + "</w>"] = len(vocab)
    (d / "vocab.json").write_text(json.dumps(vocab))
    (d / "merges.txt").write_text("#version: 0.2\n")
    return CLIPTokenizer(str(d / "vocab.json"), str(d / "merges.txt"), model_max_length=max_len), len(vocab)


def _text_config(vocab: int, **kw):
    from transformers import CLIPTextConfig
    return CLIPTextConfig(bos_token_id=0, eos_token_id=1, pad_token_id=1, hidden_size=16, intermediate_size=16,
                          num_attention_heads=2, num_hidden_layers=1, vocab_size=vocab, max_position_embeddings=16, **kw)


def _vae():
    from diffusers import AutoencoderKL
    return AutoencoderKL(block_out_channels=[8, 8, 8, 8], in_channels=3, out_channels=3,
                         down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4,
                         latent_channels=4, norm_num_groups=8, layers_per_block=1)


def build_sd_img2img(d: Path, seed: int = 0) -> str:
    """A tiny Stable Diffusion image-to-image pipeline (no safety checker) saved with ``save_pretrained``."""
    import torch
    from diffusers import PNDMScheduler, StableDiffusionImg2ImgPipeline, UNet2DConditionModel
    from transformers import CLIPTextModel
    torch.manual_seed(seed)
    tok, n = _clip_tokenizer(d / "_tok")
    unet = UNet2DConditionModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=8, in_channels=4,
                                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=16,
                                norm_num_groups=8, attention_head_dim=2)
    pipe = StableDiffusionImg2ImgPipeline(vae=_vae(), text_encoder=CLIPTextModel(_text_config(n)), tokenizer=tok,
                                          unet=unet, scheduler=PNDMScheduler(skip_prk_steps=True, steps_offset=1),
                                          safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    pipe.save_pretrained(d / "sd")
    return str(d / "sd")


def build_sdxl(d: Path, seed: int = 0) -> str:
    """A tiny Stable Diffusion XL text-to-image pipeline (two text encoders) saved with ``save_pretrained``."""
    import torch
    from diffusers import EulerDiscreteScheduler, StableDiffusionXLPipeline, UNet2DConditionModel
    from transformers import CLIPTextModel, CLIPTextModelWithProjection
    torch.manual_seed(seed)
    tok, n = _clip_tokenizer(d / "_tok")
    unet = UNet2DConditionModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=8, in_channels=4,
                                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), attention_head_dim=(2, 4),
                                use_linear_projection=True, addition_embed_type="text_time",
                                addition_time_embed_dim=8, transformer_layers_per_block=(1, 1),
                                projection_class_embeddings_input_dim=8 * 6 + 16, cross_attention_dim=32,
                                norm_num_groups=8)
    pipe = StableDiffusionXLPipeline(vae=_vae(), text_encoder=CLIPTextModel(_text_config(n)),
                                     text_encoder_2=CLIPTextModelWithProjection(_text_config(n, projection_dim=16)),
                                     tokenizer=tok, tokenizer_2=tok, unet=unet,
                                     scheduler=EulerDiscreteScheduler(steps_offset=1))
    pipe.save_pretrained(d / "sdxl")
    return str(d / "sdxl")


def draw_pair(d: Path, w: int = 64, h: int = 48) -> tuple[str, str]:
    """Two images alike but for one square (top-left: red in the first, blue in the second)."""
    from PIL import Image, ImageDraw
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for i, col in enumerate([(220, 30, 30), (30, 30, 220)]):
        grad = np.linspace(40, 200, w, dtype=np.uint8)[None, :, None].repeat(h, 0).repeat(3, 2)
        img = Image.fromarray(grad)
        ImageDraw.Draw(img).rectangle((8, 8, 23, 23), fill=col)
        ImageDraw.Draw(img).ellipse((36, 20, 56, 40), fill=(20, 160, 40))
        img.save(d / f"pair{i + 1}.png")
        out.append(str(d / f"pair{i + 1}.png"))
    return out[0], out[1]
