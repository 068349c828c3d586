"""``sdxl_prompt2prompt_mapper`` (Data-Juicer's): two images of the same scene for two captions (the text fields
``text_key`` and ``text_key_second``), made with Prompt-to-Prompt on Stable Diffusion XL.

The pipeline (``hf_diffusion``, default ``stabilityai/stable-diffusion-xl-base-1.0``) is a diffusers SDXL
directory (``save_pretrained``; a local directory or a Hugging Face repo id in the model store, never
downloaded) loaded with ``diffusers.DiffusionPipeline`` in ``torch_dtype``. Data-Juicer runs its own copy of the
prompt-to-prompt-with-sdxl pipeline; gristmill runs diffusers' own SDXL pipeline with Prompt-to-Prompt's
attention control installed as the UNet's attention processors, with Data-Juicer's edit: ``refine``,
self-attention replaced during the first 40% of the steps, cross-attention refined during every step (the word
``confetti`` during the first 80%). That is:

- both prompts start from the same initial latents;
- in every attention layer, the conditional half of the batch is edited: the second prompt's cross-attention
  maps become, per text token aligned with a token of the first prompt (a global alignment of the two token
  sequences: match +1, mismatch -1, gap 0), the first prompt's map for it (tokens without a match keep their
  own), mixed by the step's word weight; its self-attention maps become the first prompt's during the
  self-replace steps in the layers whose maps are at most ``ceil(width / 32)`` squared long;
- height and width are the pipeline's defaults (the UNet's sample size x the VAE scale).

The two images are written as JPEG to ``output_dir/__dj__produced_data__/sdxl_prompt2prompt_mapper/`` and their
paths set in ``image_path1`` and ``image_path2``. Data-Juicer draws a random seed and names the files by time
and a random number; gristmill seeds each row from ``seed`` and the two prompts and names the files by a hash
of them and the params, so a rerun writes the same files.
"""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media.paths import digest, write_atomic
from ...registry import register
from ..base import Mapper, Params
from .model_diffusion import check_pipeline_ref, load_pipeline, seed_of

OP = "sdxl_prompt2prompt_mapper"
EDIT = {"edit_type": "refine", "n_self_replace": 0.4, "n_cross_replace": {"default_": 1.0, "confetti": 0.8}}


def global_align(x: list, y: list) -> list[tuple[int, int]]:
    """Prompt-to-Prompt's alignment of token sequences ``x``, ``y`` (Needleman-Wunsch: match 1, mismatch -1,
    gap 0; ties prefer a gap in ``x``, then in ``y``): for each position of ``y``, (its index, the aligned index
    in ``x`` or -1)."""
    n, m = len(x), len(y)
    score = np.zeros((n + 1, m + 1), np.int64)
    trace = np.zeros((n + 1, m + 1), np.int8)
    trace[0, 1:], trace[1:, 0], trace[0, 0] = 1, 2, 4
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            left, up = score[i, j - 1], score[i - 1, j]
            diag = score[i - 1, j - 1] + (1 if x[i - 1] == y[j - 1] else -1)
            best = max(left, up, diag)
            score[i, j] = best
            trace[i, j] = 1 if best == left else 2 if best == up else 3
    out, i, j = [], n, m
    while i > 0 or j > 0:
        t = trace[i, j]
        if t == 3:
            i, j = i - 1, j - 1
            out.append((j, i))
        elif t == 1:
            j -= 1
            out.append((j, -1))
        elif t == 2:
            i -= 1
        else:
            break
    return out[::-1]


def refinement_mapper(ids1: list[int], ids2: list[int], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(mapper, alphas) over ``max_len`` key tokens: for each token of prompt 2, the token of prompt 1 whose map
    it takes, and 1 where there is one (0: keep its own); past prompt 2's tokens, the identity (alpha 1)."""
    ids1, ids2 = ids1[:max_len], ids2[:max_len]
    pairs = global_align(ids1, ids2)
    mapper = np.zeros(max_len, np.int64)
    alphas = np.ones(max_len, np.float32)
    k = min(len(pairs), max_len)
    for t, (_, i) in enumerate(pairs[:k]):
        mapper[t] = i
        alphas[t] = float(i != -1)
    mapper[k:] = len(ids2) + np.arange(max_len - k)
    return mapper, alphas


def word_token_positions(text: str, word: str, tokenizer) -> list[int]:
    """Positions (after the start token) of the tokens spelling ``word`` where it stands alone in ``text``."""
    words = text.split(" ")
    places = [i for i, w in enumerate(words) if w == word]
    out: list[int] = []
    if not places:
        return out
    pieces = [tokenizer.decode([t]).strip("#") for t in tokenizer.encode(text)][1:-1]
    cur, ptr = 0, 0
    for i, piece in enumerate(pieces):
        cur += len(piece)
        if ptr in places:
            out.append(i + 1)
        if ptr < len(words) and cur >= len(words[ptr]):
            ptr, cur = ptr + 1, 0
    return out


def cross_alpha(prompt2: str, steps: int, spec: dict, tokenizer, max_len: int) -> np.ndarray:
    """Per step (``steps + 1`` rows) and key token, whether prompt 2's cross-attention is refined: ``default_``
    for every token, then per word for its tokens (a fraction: the steps below it)."""
    alpha = np.zeros((steps + 1, max_len), np.float32)

    def put(bounds, cols):
        lo, hi = (0.0, bounds) if isinstance(bounds, (int, float)) else bounds
        a, b = int(lo * (steps + 1)), int(hi * (steps + 1))
        alpha[:a, cols] = 0
        alpha[a:b, cols] = 1
        alpha[b:, cols] = 0
    put(spec.get("default_", (0.0, 1.0)), slice(None))
    for word, bounds in spec.items():
        if word != "default_":
            cols = [c for c in word_token_positions(prompt2, word, tokenizer) if c < max_len]
            if cols:
                put(bounds, cols)
    return alpha


class RefineControl:
    """Prompt-to-Prompt's refine edit for a batch of two prompts under classifier-free guidance."""

    def __init__(self, mapper, alphas, alpha_time, steps: int, self_replace: float, attn_res: int, n_layers: int):
        import torch
        self.mapper = torch.as_tensor(mapper)
        self.alphas = torch.as_tensor(alphas).reshape(1, 1, 1, -1)
        self.alpha_time = torch.as_tensor(alpha_time)
        self.self_steps = (0, int(steps * self_replace))
        self.max_self = attn_res ** 2
        self.n_layers, self.layer, self.step = n_layers, 0, 0

    def __call__(self, attn, is_cross: bool):
        h = attn.shape[0]
        attn[h // 2:] = self.edit(attn[h // 2:], is_cross)
        self.layer += 1
        if self.layer == self.n_layers:
            self.layer, self.step = 0, self.step + 1
        return attn

    def edit(self, attn, is_cross: bool):
        if not (is_cross or self.self_steps[0] <= self.step < self.self_steps[1]):
            return attn
        heads = attn.shape[0] // 2
        a = attn.reshape(2, heads, *attn.shape[1:])
        base, repl = a[0], a[1:]
        if is_cross:
            n = a.shape[-1]
            mapper, alphas = self.mapper[:n].to(a.device), self.alphas[..., :n].to(a.device, a.dtype)
            refined = base[:, :, mapper].unsqueeze(0) * alphas + repl * (1 - alphas)
            w = self.alpha_time[min(self.step, len(self.alpha_time) - 1), :n].to(a.device, a.dtype)
            a[1:] = refined * w + repl * (1 - w)
        elif repl.shape[2] <= self.max_self:
            a[1:] = base.unsqueeze(0).expand_as(repl)
        return a.reshape(2 * heads, *a.shape[2:])


class P2PAttnProcessor:
    """Attention with explicit probabilities, edited by the controller (diffusers' basic processor plus one call)."""

    def __init__(self, control: RefineControl):
        self.control = control

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None, *args,
                 **kwargs):
        import torch
        residual = hidden_states
        batch, seq, _ = hidden_states.shape
        attention_mask = attn.prepare_attention_mask(attention_mask, seq, batch)
        if attn.group_norm is not None:
            hidden_states = attn.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
        query = attn.to_q(hidden_states)
        is_cross = encoder_hidden_states is not None
        if not is_cross:
            encoder_hidden_states = hidden_states
        elif attn.norm_cross:
            encoder_hidden_states = attn.norm_encoder_hidden_states(encoder_hidden_states)
        key = attn.head_to_batch_dim(attn.to_k(encoder_hidden_states))
        value = attn.head_to_batch_dim(attn.to_v(encoder_hidden_states))
        probs = attn.get_attention_scores(attn.head_to_batch_dim(query), key, attention_mask)
        probs = self.control(probs, is_cross)
        out = attn.batch_to_head_dim(torch.bmm(probs, value))
        out = attn.to_out[1](attn.to_out[0](out))
        if attn.residual_connection:
            out = out + residual
        return out / attn.rescale_output_factor


def prompt2prompt(pipe, prompts: list[str], seed: int, steps: int, guidance_scale: float):
    """Two PIL images for ``prompts`` under Data-Juicer's refine edit."""
    import math

    import torch
    height = width = pipe.unet.config.sample_size * pipe.vae_scale_factor
    tok = pipe.tokenizer
    max_len = tok.model_max_length
    ids1, ids2 = tok.encode(prompts[0]), tok.encode(prompts[1])
    mapper, alphas = refinement_mapper(ids1, ids2, max_len)
    alpha_time = cross_alpha(prompts[1], steps, EDIT["n_cross_replace"], tok, max_len)
    names = list(pipe.unet.attn_processors)
    control = RefineControl(mapper, alphas, alpha_time, steps, EDIT["n_self_replace"], math.ceil(width / 32),
                            len(names))
    saved = pipe.unet.attn_processors
    pipe.unet.set_attn_processor({n: P2PAttnProcessor(control) for n in names})
    try:
        gen = torch.Generator(device="cpu").manual_seed(seed)
        shape = (1, pipe.unet.config.in_channels, height // pipe.vae_scale_factor, width // pipe.vae_scale_factor)
        latents = torch.randn(shape, generator=gen, dtype=torch.float32).to(pipe.device, pipe.unet.dtype)
        with torch.no_grad():
            return pipe(prompts, guidance_scale=guidance_scale, num_inference_steps=steps,
                        latents=latents.repeat(2, 1, 1, 1), generator=gen).images
    finally:
        pipe.unet.set_attn_processor(saved)


@register(OP)
class SDXLPrompt2PromptMapper(Mapper):
    """Generate a pair of images of the same scene for the captions in ``text_key`` and ``text_key_second``
    (Prompt-to-Prompt's refine edit on Stable Diffusion XL); their paths go to ``image_path1`` and
    ``image_path2``."""

    inputs = ("{text_key}", "{text_key_second}")
    outputs = ("image_path1", "image_path2")
    requires = ("PIL", "torch", "transformers", "diffusers")
    resources = Resources(memory=38 * 2**30)
    version = 1

    class Params(Params):
        hf_diffusion: str = trust.path_param(
            "model", "stabilityai/stable-diffusion-xl-base-1.0", description="Diffusers SDXL pipeline: a local "
                                                                            "directory, or a repo id in the store.")
        trust_remote_code: bool = Field(False, description="Let diffusers/transformers run code shipped with the "
                                                           "models.")
        torch_dtype: str = Field("fp32", pattern="^(fp32|fp16|bf16)$", description="Weights' floating point type.")
        num_inference_steps: float = Field(50, ge=1, description="Denoising steps.")
        guidance_scale: float = Field(7.5, description="Classifier-free guidance scale.")
        text_key_second: str | None = Field(None, description="Field holding the second caption (required).")
        output_dir: str = trust.path_param(
            "write", "~/.cache/data_juicer/assets", description="Where the images go (under "
                                                                "__dj__produced_data__/sdxl_prompt2prompt_mapper).")
        device: str = Field("auto", description="Torch device: 'auto' (CUDA when a GPU is visible, else CPU), "
                                                "'cpu', 'cuda:1'... (gristmill).")
        seed: int = Field(0, description="Seed of the generations, with the prompts (gristmill).")

    def __init__(self, **params):
        super().__init__(**params)
        if not self.params.text_key_second:
            raise ValueError(f"{OP}: set text_key_second, the field holding the second caption of each pair")
        check_pipeline_ref(self.params.hf_diffusion, "hf_diffusion")

    def models(self) -> list[str]:
        from ...media import inference as inf
        return inf.store_names(self.params.hf_diffusion)

    def process_batch(self, batch):
        p = self.params
        self.check_inputs(batch)
        first = self.text(batch).to_pylist()
        second = C.get_field(batch, p.text_key_second).to_pylist()
        out_dir = os.path.join(os.path.expanduser(p.output_dir), "__dj__produced_data__", OP)
        cfg = {"op": OP, **p.model_dump(exclude={"output_dir", "device", "text_key", "text_key_second"})}
        paths1, paths2 = [], []
        pipe = None
        for a, b in zip(first, second):
            if not isinstance(a, str) or not isinstance(b, str):
                raise ValueError(f"{OP}: both captions must be strings, got {type(a).__name__} and {type(b).__name__}")
            h = digest(cfg, a, b)
            names = [os.path.join(out_dir, f"image_pair_{h}_{k}.jpg") for k in (1, 2)]
            if not all(os.path.exists(n) for n in names):
                if pipe is None:
                    pipe = self.resource("pipe", lambda: load_pipeline(p.hf_diffusion, p.device, p.torch_dtype,
                                                                       p.trust_remote_code, kind="any"))
                imgs = prompt2prompt(pipe, [a, b], seed_of(p.seed, a, b), int(p.num_inference_steps),
                                     p.guidance_scale)
                for img, name in zip(imgs, names):
                    trust.check_write(name, f"{OP}: produced file")
                    write_atomic(name, lambda tmp, img=img: img.convert("RGB").save(tmp, format="JPEG"))
            paths1.append(names[0]), paths2.append(names[1])
        batch = C.set_column(batch, "image_path1", pa.array(paths1, pa.string()))
        return C.set_column(batch, "image_path2", pa.array(paths2, pa.string()))
