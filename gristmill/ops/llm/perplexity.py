"""llm_perplexity_filter (Data-Juicer's): the perplexity of each row's response under a local causal
language model (transformers; a directory or a model-store name, never downloaded), kept within
[min_score, max_score]. As in Data-Juicer, the text scored is the query (``query_template``, default empty)
and the response (``response_template``, default ``{text}``) joined by a space; only the response's tokens
count in the loss, and ``model_params.max_length`` truncates from the left. Stat ``llm_perplexity``."""
from __future__ import annotations

import math
import os

from pydantic import Field

from ...core import trust
from ...registry import register
from ..base import Filter, Params


@register("llm_perplexity_filter")
class LLMPerplexityFilter(Filter):
    """Keep rows whose response's perplexity under a local causal LM (``hf_model``) is within
    [min_score, max_score]."""

    stat = "llm_perplexity"
    inputs = ("{text_key}",)
    requires = ("transformers", "torch")

    class Params(Params):
        hf_model: str = trust.path_param("model", "Qwen/Qwen2.5-0.5B", description="Causal LM: a local directory "
                                         "or a model-store name.")
        model_params: dict | None = Field(None, description="max_length (truncation, from the left); device.")
        min_score: float = Field(1.0, description="Minimum perplexity.")
        max_score: float = Field(100.0, description="Maximum perplexity.")
        query_template: str | None = Field(None, description="The query, formatted with the row's fields "
                                           "(default empty).")
        response_template: str | None = Field(None, description="The response, formatted with the row's fields "
                                              "(default {text}).")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.query_template = p.query_template or ""
        self.response_template = p.response_template or "{text}"
        if os.path.isdir(p.hf_model) or not trust.is_model_name(p.hf_model):
            trust.check_read(p.hf_model, f"{self.name}.hf_model")

    def models(self) -> list[str]:
        return [] if os.path.isdir(self.params.hf_model) else [self.params.hf_model]

    def _load(self):
        import transformers

        from ._local import model_path
        path = model_path(self.params.hf_model)
        tok = transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        tok.pad_token = tok.pad_token or tok.eos_token
        tok.padding_side = "left"
        tok.truncation_side = "left"
        model = transformers.AutoModelForCausalLM.from_pretrained(path, trust_remote_code=False)
        device = (self.params.model_params or {}).get("device")
        if device:
            model = model.to(device)
        model.eval()
        return model, tok

    def score_row(self, row: dict) -> float:
        import torch
        model, tok = self.resource("causal_lm", self._load)
        fields = {k: v for k, v in row.items() if isinstance(k, str)}
        query = self.query_template.format(**fields)
        response = self.response_template.format(**fields)
        full_text = " ".join([query, response]).strip()
        max_length = (self.params.model_params or {}).get("max_length")
        input_ids = tok(full_text, max_length=max_length, truncation=True, return_tensors="pt")["input_ids"]
        response_ids = tok(response.strip(), max_length=max_length, truncation=True, return_tensors="pt")["input_ids"][0]
        response_len = len(response_ids) - int(tok.bos_token_id is not None)
        labels = input_ids.clone()
        labels[0, :-response_len] = -100
        with torch.no_grad():
            loss = model(input_ids=input_ids.to(model.device), labels=labels.to(model.device)).loss.item()
        return math.exp(loss)
