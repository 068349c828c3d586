"""mllm_mapper (Data-Juicer's): a local vision-language model (``hf_model``, default
``llava-hf/llava-v1.6-vicuna-7b-hf``; any image-text-to-text model whose processor has a chat template, e.g.
LLaVA, Qwen2-VL: a local directory or a repo id in the model store, never downloaded) answers the sample's text
about each of its images. As in Data-Juicer the prompt is the processor's chat template over one user turn (the
text, then the image) with the generation prompt, and each distinct image of the sample (in order) gives one
answer: the whole generated sequence decoded without special tokens (prompt included, as Data-Juicer decodes
it). The text field becomes the list of answers. A sample without images is left as it is, its text as a
one-item list (an Arrow column has one type; Data-Juicer leaves the string).

Generation uses Data-Juicer's arguments (``max_new_tokens``, ``temperature``, ``top_p``, ``num_beams``;
sampling only where the model's generation config asks for it). The (prompt, image) pairs of a batch are
generated ``batch_size`` at a time (left padding under the attention mask), torch seeded with ``seed`` before
each call."""
from __future__ import annotations

import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import inference as inf
from ...registry import register
from ..base import Mapper
from ._common import ImageParams
from .model_clip import rgb


@register("mllm_mapper")
class MllmMapper(Mapper):
    """Answer each sample's text about each of its images with a local vision-language model; the text becomes
    the list of answers (one per distinct image)."""

    inputs = ("{text_key}", "{image_key}")
    outputs = ("{text_key}",)
    requires = ("PIL", "torch", "transformers")
    resources = Resources(memory=32 * 2**30)
    version = 1

    class Params(ImageParams):
        hf_model: str = trust.path_param("model", "llava-hf/llava-v1.6-vicuna-7b-hf", description="Vision-language "
                                         "model: a local directory or a repo id in the model store.")
        max_new_tokens: int = Field(256, ge=1, description="Most tokens generated per answer.")
        temperature: float | None = Field(0.2, description="Sampling temperature (used when the model samples).")
        top_p: float | None = Field(None, description="Nucleus sampling threshold (used when the model samples).")
        num_beams: int = Field(1, ge=1, description="Beam search size.")
        trust_remote_code: bool = Field(False, description="Let transformers run code shipped with the model.")
        device: str = Field("auto", description="Torch device: 'auto' (CUDA when a GPU is visible, else CPU), "
                                                "'cpu', 'cuda:1'...")
        batch_size: int = Field(4, ge=1, description="(prompt, image) pairs per generate call (gristmill).")
        seed: int = Field(0, description="Torch seed before each generate call (gristmill).")

    def __init__(self, **params):
        super().__init__(**params)
        inf.check_ref(self.params.hf_model, "hf_model")

    def models(self) -> list[str]:
        return inf.store_names(self.params.hf_model)

    def _load(self):
        import transformers
        p = self.params
        cls = None
        try:
            cfg = transformers.AutoConfig.from_pretrained(inf.model_dir(p.hf_model), local_files_only=True,
                                                          trust_remote_code=trust.remote_code_allowed(p.trust_remote_code))
            if not (getattr(cfg, "architectures", None) and hasattr(transformers, cfg.architectures[0])):
                cls = transformers.AutoModelForImageTextToText
        except (OSError, ValueError):
            pass
        model, proc = inf.load_hf(p.hf_model, p.device, p.trust_remote_code, cls)
        tok = getattr(proc, "tokenizer", None)
        if tok is not None:
            tok.padding_side = "left"
            if tok.pad_token is None:
                tok.pad_token = tok.eos_token
        return model, proc

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        import torch
        p = self.params
        self.check_inputs(batch)
        texts = self.text(batch).to_pylist()
        images = [list(dict.fromkeys(r or [])) for r in C.get_field(batch, p.image_key).to_pylist()]
        jobs = [(r, t, v) for r, (t, imgs) in enumerate(zip(texts, images)) for v in imgs]
        answers: list[list[str]] = [[] if imgs else [t] for t, imgs in zip(texts, images)]
        if jobs:
            model, proc = self.resource("vlm", self._load)
            prompts = {}
            for _, t, _ in jobs:
                if t not in prompts:
                    conv = [{"role": "user", "content": [{"type": "text", "text": t}, {"type": "image"}]}]
                    prompts[t] = proc.apply_chat_template(conv, add_generation_prompt=True)
            gen = dict(max_new_tokens=p.max_new_tokens, temperature=p.temperature, top_p=p.top_p,
                       num_beams=p.num_beams)
            with torch.inference_mode():
                for s in range(0, len(jobs), p.batch_size):
                    part = jobs[s:s + p.batch_size]
                    inputs = proc(images=[rgb(v) for _, _, v in part], text=[prompts[t] for _, t, _ in part],
                                  return_tensors="pt", padding=True).to(model.device)
                    torch.manual_seed(p.seed)
                    out = model.generate(**inputs, **gen)
                    for (r, _, _), seq in zip(part, out.cpu()):
                        answers[r].append(proc.decode(seq, skip_special_tokens=True))
        return C.set_column(batch, self.text_key, pa.array(answers, pa.list_(pa.string())))
