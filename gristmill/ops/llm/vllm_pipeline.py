"""Data-Juicer 1.6.1's Ray vLLM pipelines, ``llm_ray_vllm_engine_pipeline`` and ``vlm_ray_vllm_engine_pipeline``:
each row's ``query`` field (``query_key``) is asked of a chat model and the answer goes to ``response``
(``response_key``). Data-Juicer builds a ``ray.data.llm`` processor around an embedded vLLM engine (Ray mode
only); gristmill runs them on any engine:

- ``is_hf_model: true`` (the default): the model (a local directory or a model-store name) is run in the worker,
  by vLLM's offline ``LLM.chat`` when the ``vllm`` package is installed (``engine_kwargs`` passed to ``vllm.LLM``
  over Data-Juicer's defaults), else by transformers (``AutoModelForCausalLM`` / ``AutoModelForImageTextToText``
  with the tokenizer's or processor's chat template). ``sampling_params`` are vLLM's: with transformers
  ``max_tokens`` (vLLM's default 16) becomes ``max_new_tokens``, ``temperature`` 0 greedy decoding, otherwise
  sampling with ``temperature`` / ``top_p`` / ``top_k`` seeded by ``seed`` (default 0: reruns give the same
  answers); ``repetition_penalty`` and ``min_tokens`` carry over; other keys are refused with one line.
- ``is_hf_model: false``: Data-Juicer's HTTP path, an OpenAI-compatible endpoint: ``api_url`` (a full URL, else
  ``$OPENAI_BASE_URL`` + ``/chat/completions``) with ``api_key`` (else ``$OPENAI_API_KEY``; one of them is
  required, as in Data-Juicer), the body ``{"model": api_or_hf_model, "messages": ..., **sampling_params}``; the
  response is ``choices.0.message.content``, null when the response has no choices. gristmill's client
  (concurrency, rate limits, retries, request cache) sends them. Data-Juicer's VLM pipeline refuses this mode;
  gristmill sends the images as JPEG/PNG data URLs in ``image_url`` parts (``detail: low``, Data-Juicer's).

Messages are Data-Juicer's: an optional system message, then the user turn (LLM: the query; VLM: the query +
``"\\n\\n"``, then each image of ``image_key``). A row whose query is null is not asked (response null). A
request that fails for good rejects its row with the error. ``accelerator_type`` is accepted (Ray's placement
hint: no effect here)."""
from __future__ import annotations

import base64
import io
import os

import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...media import IMAGE_KEY, open_media
from ...registry import register
from ..base import Mapper
from ._api import APIClientParams, APIOp, raise_failed

DEFAULT_ENGINE_KWARGS = dict(enable_chunked_prefill=True, max_num_batched_tokens=4096, max_model_len=4096,
                             tensor_parallel_size=1, pipeline_parallel_size=1, trust_remote_code=True)
# vLLM SamplingParams keys the transformers fallback honours (vLLM's names)
LOCAL_SAMPLING = ("max_tokens", "temperature", "top_p", "top_k", "seed", "repetition_penalty", "min_tokens")


class PipelineParams(APIClientParams):
    api_or_hf_model: str = Field("Qwen/Qwen2.5-7B-Instruct", description="The model: with is_hf_model a local "
                                 "directory or a model-store name, else the model name sent in each request.")
    is_hf_model: bool = Field(True, description="Run the model in the worker (vLLM when installed, else "
                              "transformers); false: ask the OpenAI-compatible endpoint api_url.")
    system_prompt: str | None = Field(None, description="System message put before the user turn.")
    accelerator_type: str | None = Field(None, description="Ray accelerator type (e.g. A100): no effect here.")
    engine_kwargs: dict | None = Field(None, description="vLLM engine arguments over Data-Juicer's defaults "
                                       "(used when vLLM runs the model).")
    query_key: str = Field("query", description="Field holding the query.")
    response_key: str = Field("response", description="Field the answer goes to.")
    device: str = Field("auto", description="Torch device of the transformers fallback: 'auto', 'cpu', "
                        "'cuda:1'... (gristmill).")


def local_generate_kwargs(sampling: dict, where: str) -> tuple[dict, int]:
    """vLLM sampling params → (transformers generate kwargs, seed)."""
    bad = sorted(set(sampling) - set(LOCAL_SAMPLING))
    if bad:
        raise ValueError(f"{where}.sampling_params: {bad} not supported without vLLM (transformers honours "
                         f"{', '.join(LOCAL_SAMPLING)})")
    s = dict(sampling)
    kw = {"max_new_tokens": int(s.get("max_tokens") or 16)}  # vLLM's SamplingParams default
    temp = float(s.get("temperature", 1.0))
    if temp <= 0:
        kw["do_sample"] = False
    else:
        kw.update(do_sample=True, temperature=temp, top_p=float(s.get("top_p", 1.0)))
        if int(s.get("top_k") or 0) > 0:
            kw["top_k"] = int(s["top_k"])
        else:
            kw["top_k"] = None
    if s.get("repetition_penalty") is not None:
        kw["repetition_penalty"] = float(s["repetition_penalty"])
    if s.get("min_tokens"):
        kw["min_new_tokens"] = int(s["min_tokens"])
    return kw, int(s.get("seed") or 0)


def media_file_bytes(value) -> bytes:
    """An image's bytes: the file's (the trust policy checked by open_media) or the bytes themselves."""
    src = open_media(value)
    if isinstance(src, io.BytesIO):
        return src.getvalue()
    with open(src, "rb") as f:
        return f.read()


def _decode_image(url: str):
    from PIL import Image
    data = base64.b64decode(url.split(",", 1)[1])
    return Image.open(io.BytesIO(data)).convert("RGB")


class LocalEngine:
    """``chat(messages) -> str``: vLLM's offline engine when installed, else a transformers model with its chat
    template (images given as data URLs in ``image_url`` parts)."""

    def __init__(self, path: str, vision: bool, sampling: dict, engine_kwargs: dict, device: str, where: str):
        self.vision = vision
        try:
            import vllm  # noqa: F401
            has_vllm = True
        except ImportError:
            has_vllm = False
        if has_vllm:
            import vllm
            self.llm = vllm.LLM(model=path, **{**DEFAULT_ENGINE_KWARGS, **(engine_kwargs or {})})
            self.sampling = vllm.SamplingParams(**sampling)
            return
        self.llm = None
        import torch
        import transformers

        from ...media import inference as inf
        inf._quiet_transformers()
        self.gen, self.seed = local_generate_kwargs(sampling, where)
        kw = {"local_files_only": True, "trust_remote_code": False}
        if vision:
            self.proc = transformers.AutoProcessor.from_pretrained(path, **kw)
            cls = transformers.AutoModelForImageTextToText
        else:
            self.proc = transformers.AutoTokenizer.from_pretrained(path, **kw)
            cls = transformers.AutoModelForCausalLM
        self.model = cls.from_pretrained(path, **kw).eval().to(inf.pick_device(device))
        self.torch = torch

    def chat(self, messages: list[dict]) -> str:
        if self.llm is not None:
            out = self.llm.chat(messages, self.sampling, use_tqdm=False)  # image_url data URLs read by vLLM
            return out[0].outputs[0].text
        torch = self.torch
        images, conv = [], []
        for m in messages:
            if isinstance(m["content"], str):
                conv.append({"role": m["role"], "content": m["content"] if not self.vision
                             else [{"type": "text", "text": m["content"]}]})
                continue
            parts = []
            for part in m["content"]:
                if part["type"] == "image_url":
                    images.append(_decode_image(part["image_url"]["url"]))
                    parts.append({"type": "image"})
                else:
                    parts.append({"type": "text", "text": part["text"]})
            conv.append({"role": m["role"], "content": parts})
        prompt = self.proc.apply_chat_template(conv, add_generation_prompt=True, tokenize=False)
        if self.vision:
            inputs = self.proc(images=images or None, text=prompt, return_tensors="pt")
        else:
            inputs = self.proc(prompt, return_tensors="pt", add_special_tokens=False)
        inputs = inputs.to(self.model.device)
        torch.manual_seed(self.seed)
        with torch.inference_mode():
            out = self.model.generate(**inputs, **self.gen)
        new = out[0, inputs["input_ids"].shape[1]:].cpu()
        tok = getattr(self.proc, "tokenizer", self.proc)
        return tok.decode(new, skip_special_tokens=True)


class _VLLMPipeline(APIOp, Mapper):
    vision = False
    requires = ()
    version = 1

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        if not p.is_hf_model:
            url = p.api_url if hasattr(p, "api_url") else None
            if not url and os.environ.get("OPENAI_BASE_URL"):
                url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
            if not url:
                raise ValueError(f"{self.name}: give api_url or set $OPENAI_BASE_URL (is_hf_model: false asks an "
                                 f"endpoint)")
            key = getattr(p, "api_key", None)
            if not key and not os.environ.get(p.api_key_env):
                raise ValueError(f"{self.name}: give api_key or set ${p.api_key_env}")
            p.api_endpoint = url
            if key:
                p.model_params = {**(p.model_params or {}), "api_key": key}
        self._init_api()
        if self._local:
            from ...models import is_hf_dir_name
            name = p.api_or_hf_model
            if not os.path.isdir(name) and not is_hf_dir_name(name):
                raise ValueError(f"{self.name}.api_or_hf_model: {name!r} is neither a local model directory nor a "
                                 f"repo id (owner/name)")
            try:
                import vllm  # noqa: F401
            except ImportError:
                local_generate_kwargs(p.sampling_params or {}, self.name)

    def missing_libraries(self) -> list[str]:
        from ...core import extras
        p = self.params
        if not p.is_hf_model:
            return []
        return extras.missing(("transformers", "torch", *(("PIL",) if self.vision else ())))

    def config(self) -> dict:
        cfg = super().config()
        cfg["params"].pop("api_key", None)
        return cfg

    def user_content(self, row: dict):
        return row[self.params.query_key]

    def row_messages(self, row: dict) -> list[dict] | None:
        if row.get(self.params.query_key) is None:
            return None
        msgs = [{"role": "user", "content": self.user_content(row)}]
        if self.params.system_prompt:
            msgs.insert(0, {"role": "system", "content": self.params.system_prompt})
        return msgs

    def _ask_local(self, bodies: list[dict], accept, tries: int):
        import time

        from ...llm.cache import open_cache, request_key
        from ...llm.client import Outcome
        from ._local import model_path
        p = self.params
        eng = self.resource("vllm_pipeline_engine", lambda: LocalEngine(
            model_path(p.api_or_hf_model), self.vision, p.sampling_params or {}, p.engine_kwargs or {}, p.device,
            self.name))
        cache = open_cache(self.client_config().cache_dir)
        outs = []
        for body in bodies:
            key = request_key({**body, "engine": "local"}, 0)
            hit = cache.get(key)
            if hit is None:
                t0 = time.perf_counter()
                text = eng.chat(body["messages"])
                self._counters.requests += 1
                self._counters.request_seconds += time.perf_counter() - t0
                hit = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
                cache.put(key, hit)
            outs.append(Outcome(hit))
        return outs

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not batch.num_rows:
            return batch
        self.check_inputs(batch)
        from ...llm.client import nested_get
        rows = C.to_pylist(batch)
        msgs = [self.row_messages(r) for r in rows]
        asked = [i for i, m in enumerate(msgs) if m is not None]
        outs = self.ask([self.chat_body(msgs[i]) for i in asked])
        raise_failed([o.error for o in outs])
        answers: list[str | None] = [None] * len(rows)
        for i, o in zip(asked, outs):
            v = nested_get(o.response, "choices.0.message.content") if o.response else None
            answers[i] = v if isinstance(v, str) or v is None else str(v)
        return C.set_column(batch, self.params.response_key, pa.array(answers, pa.string()))


@register("llm_ray_vllm_engine_pipeline")
class LLMRayVLLMEnginePipeline(_VLLMPipeline):
    """Ask each row's query of a chat model (local vLLM / transformers, or an OpenAI-compatible endpoint); the
    answer goes to the response field."""

    inputs = ("{query_key}",)
    outputs = ("{response_key}",)

    class Params(PipelineParams):
        api_url: str | None = Field(None, description="Full chat-completions URL (is_hf_model: false); default "
                                    "$OPENAI_BASE_URL + /chat/completions.")
        api_key: str | None = Field(None, description="API key (is_hf_model: false); default $OPENAI_API_KEY.")


@register("vlm_ray_vllm_engine_pipeline")
class VLMRayVLLMEnginePipeline(_VLLMPipeline):
    """Ask each row's query about its images of a vision-language model (local vLLM / transformers, or an
    OpenAI-compatible endpoint); the answer goes to the response field."""

    vision = True
    inputs = ("{query_key}", "{image_key}?")
    outputs = ("{response_key}",)

    class Params(PipelineParams):
        image_key: str = Field(IMAGE_KEY, description="Field holding each row's list of images.")
        api_url: str | None = Field(None, description="Full chat-completions URL (is_hf_model: false; gristmill: "
                                    "Data-Juicer refuses the API mode here); default $OPENAI_BASE_URL + "
                                    "/chat/completions.")
        api_key: str | None = Field(None, description="API key (is_hf_model: false); default $OPENAI_API_KEY.")

    def user_content(self, row: dict):
        parts = [{"type": "text", "text": row[self.params.query_key] + "\n\n"}]
        for img in row.get(self.params.image_key) or []:
            data = media_file_bytes(img)
            mime = "image/png" if data[:8] == b"\x89PNG\r\n\x1a\n" else "image/jpeg"
            url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
            parts.append({"type": "image_url", "image_url": {"url": url, "detail": "low"}})
        return parts
