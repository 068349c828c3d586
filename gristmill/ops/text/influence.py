"""Data-Juicer's language-model-loss filters beyond perplexity: ``instruction_following_difficulty_filter``
(IFD, arXiv 2308.12032: the response's loss with the query over its loss alone; stat ``ifd_score``) and
``in_context_influence_filter`` (how a sample and validation samples change each other's loss as in-context
demonstrations; stat ``in_context_influence``). The causal LM (``hf_model``) is a local directory or a repo id
in the model store, never downloaded; losses are computed as ``llm_perplexity_filter`` computes them
(``_causal_loss``), all the texts of a batch together, ``batch_size`` per forward."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...core.resources import Resources
from ...media import inference as inf
from ...registry import register
from ..base import Filter, Params
from ._causal_loss import CausalLoss, messages_of


class _LossParams(Params):
    hf_model: str = trust.path_param("model", "Qwen/Qwen2.5-0.5B", description="Causal LM: a local directory or a "
                                     "repo id in the model store.")
    model_params: dict | None = Field(None, description="max_length (left truncation), device, trust_remote_code.")
    min_score: float = Field(1.0, description="Minimum score to keep a sample.")
    max_score: float = Field(100.0, description="Maximum score to keep a sample.")
    query_template: str | None = Field(None, description="The query (user turn), formatted with the row's fields "
                                       "(default empty).")
    response_template: str | None = Field(None, description="The response (assistant turn), formatted with the "
                                          "row's fields (default {text}).")
    device: str = Field("auto", description="Torch device: 'auto' (CUDA when a GPU is visible, else CPU), "
                                            "'cpu', 'cuda:1'... (model_params.device wins).")
    batch_size: int = Field(8, ge=1, description="Sequences per forward pass (gristmill).")


class _LossFilter(Filter):
    requires = ("torch", "transformers")
    resources = Resources(memory=2 * 2**30)

    def __init__(self, **params):
        super().__init__(**params)
        inf.check_ref(self.params.hf_model, "hf_model")

    def models(self) -> list[str]:
        return inf.store_names(self.params.hf_model)

    def input_fields(self) -> list[str]:
        return []  # the templates' fields or messages, per row

    def lm(self) -> CausalLoss:
        p = self.params
        return self.resource("lm", lambda: CausalLoss(p.hf_model, p.device, p.model_params, p.batch_size))

    def msgs(self, row: dict, system_prompt: str | None = None) -> list[dict]:
        p = self.params
        return messages_of(row, p.query_template or "", p.response_template or "{text}", system_prompt)


@register("instruction_following_difficulty_filter")
class InstructionFollowingDifficultyFilter(_LossFilter):
    """Keep samples whose IFD score (the response's LM loss with the query before it, over its loss alone) is
    within [min_score, max_score]."""

    stat = "ifd_score"
    Params = _LossParams

    def compute_stats(self, batch):
        rows = C.to_pylist(batch)
        full = [self.msgs(r) for r in rows]
        alone = [m[-1:] for m in full]
        losses = self.lm().losses(full + alone) if rows else np.zeros(0)
        n = len(rows)
        return C.with_stats(batch, {self.stat: pa.array(losses[:n] / losses[n:], pa.float64())})


@register("in_context_influence_filter")
class InContextInfluenceFilter(_LossFilter):
    """Keep samples whose in-context influence on (or from) the validation samples is within
    [min_score, max_score]: with ``valid_as_demo`` the mean over validation samples v of L(A|Q) / L(A|task_desc,
    Q_v, A_v, Q); otherwise the mean of L(A_v|task_desc, Q_v) / L(A_v|Q, A, task_desc, Q_v)."""

    stat = "in_context_influence"

    class Params(_LossParams):
        valid_dataset: list[dict] | None = Field(None, description="The validation samples (required).")
        task_desc: str | None = Field(None, description="The validation task's description (a system turn before "
                                      "each validation sample).")
        valid_as_demo: bool = Field(False, description="Score the sample with validation demos before it, instead of "
                                    "validation samples with the sample before them.")
        n_shot: int | None = Field(None, ge=1, description="Use the first n_shot validation samples (default all).")

    def __init__(self, **params):
        super().__init__(**params)
        if not self.params.valid_dataset:
            raise ValueError("in_context_influence_filter: valid_dataset is required (a non-empty list of samples)")

    def _valid(self):
        def load():
            p = self.params
            vs = [self.msgs(dict(v), p.task_desc) for v in p.valid_dataset[:p.n_shot or len(p.valid_dataset)]]
            return vs, self.lm().losses(vs)
        return self.resource("valid", load)

    def compute_stats(self, batch):
        rows = C.to_pylist(batch)
        scores = np.zeros(len(rows))
        if rows:
            valid, valid_loss = self._valid()
            samples = [self.msgs(r) for r in rows]
            k = len(valid)
            if self.params.valid_as_demo:  # L(A|Q) / L(A|demo, Q)
                seqs = samples + [v + s for s in samples for v in valid]
                loss = self.lm().losses(seqs)
                alone, with_demo = loss[:len(rows)], loss[len(rows):].reshape(len(rows), k)
                scores = (alone[:, None] / with_demo).mean(axis=1)
            else:  # L(A_v|Q_v) / L(A_v|Q, A, Q_v)
                loss = self.lm().losses([s + v for s in samples for v in valid]).reshape(len(rows), k)
                scores = (valid_loss[None, :] / loss).mean(axis=1)
        return C.with_stats(batch, {self.stat: pa.array(scores, pa.float64())})
