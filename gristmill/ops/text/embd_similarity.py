"""text_embd_similarity_filter (Data-Juicer's): the mean cosine similarity of a sample's embedding to the
embeddings of a validation set (``valid_dataset``, a list of samples in the recipe), kept within
[min_score, max_score]. Stat ``text_embd_similarity``.

The text embedded is ``input_template`` formatted with the sample's fields (default ``{<text_key>}``; a
sample lacking a field of the template is formatted with the contents of its ``messages``, in order, as in
Data-Juicer). Embeddings come from

- an OpenAI-compatible ``/embeddings`` endpoint (``is_hf_model: false``, the default): the model
  ``api_or_hf_model``, ``dimensions: ebd_dim`` and ``encoding_format: float`` in each request, as Data-Juicer
  asks; with the default ``response_path`` (``data.0.embedding``) ``batch_size`` texts go in one request
  (each answer's ``data[i]`` by its index), with another path one text per request read at that path;
- or a local transformers model (``is_hf_model: true``; a directory or a model-store name, never
  downloaded): ``AutoModel``'s last hidden state pooled as Data-Juicer pools it (``pooling``: None the last
  token, ``mean``, ``weighted_mean``), L2-normalised, texts cut at 4096 tokens. The texts of a batch are
  encoded together (right padding; each text pooled over its own tokens, the same vector as one text at a
  time to float precision).

The sample's vector is rounded to float32 and compared in float64 with the validation vectors (Data-Juicer's
torch promotion). A row whose embedding request fails for good is rejected (Data-Juicer logs a warning and
keeps the row with a null stat)."""
from __future__ import annotations

import string

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core.resources import Resources
from ...media import inference as inf
from ...registry import register
from ..base import Filter
from ..llm._api import APIClientParams, APIOp


def sample_text(template: str, row: dict) -> str:
    """Data-Juicer's ``_sample_to_text``: the template formatted with the row, else with its messages' contents."""
    keys = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    if all(k in row for k in keys):
        return template.format(**row)
    msgs = row.get("messages")
    if not isinstance(msgs, list):
        raise ValueError(f"input_template {template!r} needs field(s) {[k for k in keys if k not in row]} "
                         f"and the sample has no messages")
    contents = [m.get("content") for m in msgs]
    return template.format(**dict(zip(keys, contents[:len(keys)])))


class HFEmbedder:
    """Data-Juicer's ``embedding`` model: AutoTokenizer + AutoModel, pooled last hidden state, unit length."""

    def __init__(self, ref: str, device: str, pooling: str | None, batch_size: int, max_len: int = 4096):
        import torch
        import transformers

        from ...core import trust
        inf._quiet_transformers()
        if inf.model_threads():
            torch.set_num_threads(inf.model_threads())
        path = inf.model_dir(ref)
        kw = {"local_files_only": True, "trust_remote_code": trust.remote_code_allowed(False)}
        self.tok = transformers.AutoTokenizer.from_pretrained(path, **kw)
        self.tok.padding_side = "right"
        if self.tok.pad_token is None:
            self.tok.pad_token = self.tok.eos_token or self.tok.unk_token
        self.model = transformers.AutoModel.from_pretrained(path, **kw).to(inf.pick_device(device)).eval()
        self.pooling, self.batch_size, self.max_len = pooling, batch_size, max_len

    def encode(self, texts: list[str]) -> np.ndarray:
        import torch
        out = []
        with torch.inference_mode():
            for part in inf.chunks(texts, self.batch_size):
                enc = self.tok(part, padding=True, truncation=True, max_length=self.max_len,
                               return_tensors="pt").to(self.model.device)
                h = self.model(**enc).last_hidden_state.float()
                mask = enc["attention_mask"].to(h.dtype)
                n = mask.sum(dim=1)
                if self.pooling == "mean":
                    e = (h * mask.unsqueeze(-1)).sum(dim=1) / n.unsqueeze(-1)
                elif self.pooling == "weighted_mean":  # weights 1..n over each text's tokens, / n², as one text alone
                    w = torch.arange(1, h.shape[1] + 1, device=h.device, dtype=h.dtype) * mask
                    e = (h * w.unsqueeze(-1)).sum(dim=1) / (n * n).unsqueeze(-1)
                else:  # the last token of each text
                    e = h[torch.arange(h.shape[0], device=h.device), n.long() - 1]
                out.append(torch.nn.functional.normalize(e, p=2, dim=1).cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, 0), np.float32)


@register("text_embd_similarity_filter")
class TextEmbdSimilarityFilter(APIOp, Filter):
    """Keep samples whose mean embedding cosine similarity to the ``valid_dataset`` samples is within
    [min_score, max_score]; embeddings from an OpenAI-compatible endpoint or a local transformers model."""

    stat = "text_embd_similarity"
    lo_param, hi_param = "min_score", "max_score"
    resources = Resources(memory=1500 * 2**20)
    version = 1

    class Params(APIClientParams):
        api_or_hf_model: str = Field("text-embedding-v4", description="Embedding model: its name at the endpoint, "
                                     "or (is_hf_model) a local directory or a model-store name.")
        is_hf_model: bool = Field(False, description="Run a local transformers model instead of asking the "
                                  "endpoint.")
        api_endpoint: str | None = Field("embeddings", description="URL path appended to the base URL, or a full "
                                         "http(s) URL.")
        response_path: str | None = Field("data.0.embedding", description="Dotted path of the vector in the "
                                          "response JSON.")
        min_score: float = Field(0.1, description="Minimum mean similarity to keep a sample.")
        max_score: float = Field(1.0, description="Maximum mean similarity to keep a sample.")
        valid_dataset: list[dict] | None = Field(None, description="The validation samples (required): each "
                                                 "embedded with input_template.")
        ebd_dim: int | None = Field(4096, description="'dimensions' asked of the endpoint (API only; null: not "
                                    "sent).")
        pooling: str | None = Field(None, description="Local model: null (last token), mean or weighted_mean.")
        input_template: str | None = Field(None, description="Template of the embedded text (default "
                                           "{<text_key>}).")
        device: str = Field("auto", description="Local model: 'auto' (CUDA when a GPU is visible, else CPU), "
                                                "'cpu', 'cuda:1'... (model_params.device wins).")
        batch_size: int = Field(32, ge=1, description="Texts per model call or per request (gristmill).")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        if not p.valid_dataset:
            raise ValueError("text_embd_similarity_filter: valid_dataset is required (a non-empty list of "
                             "samples to compare with)")
        if p.pooling not in (None, "mean", "weighted_mean"):
            raise ValueError(f"text_embd_similarity_filter: pooling must be null, mean or weighted_mean, "
                             f"got {p.pooling!r}")
        self._init_api()
        if self._local:
            inf.check_ref(p.api_or_hf_model, "api_or_hf_model")

    @property
    def template(self) -> str:
        return self.params.input_template or "{" + self.text_key + "}"

    def input_fields(self) -> list[str]:
        return []  # the template's fields, or messages: checked per row

    def _embed(self, texts: list[str]) -> np.ndarray:
        p = self.params
        if not texts:
            return np.zeros((0, 0))
        if self._local:
            dev = (p.model_params or {}).get("device") or p.device
            model = self.resource("hf_embedder", lambda: HFEmbedder(p.api_or_hf_model, dev, p.pooling, p.batch_size))
            return model.encode(texts)
        return np.asarray(self._embed_api(texts), np.float64)

    def _embed_api(self, texts: list[str]) -> list:
        from ...llm.client import RequestFailed, client_for, nested_get
        p = self.params
        extra = {"model": p.api_or_hf_model, "encoding_format": "float"}
        if p.ebd_dim is not None:
            extra["dimensions"] = p.ebd_dim
        batched = (p.response_path or "data.0.embedding") == "data.0.embedding"
        step = p.batch_size if batched else 1
        bodies = [dict(extra, input=texts[i:i + step] if batched else texts[i]) for i in range(0, len(texts), step)]
        client = client_for(self.client_config())
        out: list = []
        for body, o in zip(bodies, client.post_many(bodies, self._counters)):
            if o.error is not None:
                raise RequestFailed(o.error)
            if batched:
                data = sorted((o.response or {}).get("data") or [], key=lambda d: d.get("index", 0))
                if len(data) != len(body["input"]):
                    raise RequestFailed(f"{self._url} returned {len(data)} embeddings for {len(body['input'])} "
                                        f"inputs")
                out.extend(d.get("embedding") for d in data)
            else:
                v = nested_get(o.response, p.response_path)
                if not isinstance(v, list):
                    raise RequestFailed(f"{self._url}: no embedding at {p.response_path!r} in the response")
                out.append(v)
        return out

    def _valid(self) -> np.ndarray:
        def load():
            texts = [sample_text(self.template, dict(r)) for r in self.params.valid_dataset]
            v = np.asarray(self._embed(texts), np.float64)
            return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-8)
        return self.resource("valid", load)

    def compute_stats(self, batch):
        rows = C.to_pylist(batch)
        texts = [sample_text(self.template, r) for r in rows]
        uniq = list(dict.fromkeys(texts))
        sims = np.zeros(len(rows))
        if uniq:
            valid = self._valid()
            e = np.asarray(self._embed(uniq), np.float32).astype(np.float64)
            e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-8)
            by = dict(zip(uniq, (e @ valid.T).mean(axis=1)))
            sims = np.array([by[t] for t in texts])
        return C.with_stats(batch, {self.stat: pa.array(sims, pa.float64())})
