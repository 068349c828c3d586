"""``text_classifier_filter``: Hugging Face sequence classifiers on text, one op for the families in use.

- Regression heads (``num_labels: 1``), FineWeb-Edu style (HuggingFaceFW/fineweb-edu-classifier, NeMo's
  FineWeb Mixtral/Nemotron edu classifiers): the score is the logit; ``int_score = round(clamp(score, 0, 5))``
  (FineWeb-Edu's rule, half to even); a row is kept when ``int_score >= min_score`` (FineWeb-Edu kept 3+).
- Label heads: a ``*ForSequenceClassification`` model with several labels, or NeMo Curator's DeBERTa
  classifiers (nvidia/quality-classifier-deberta, nvidia/domain-classifier: a ``PyTorchModelHubMixin``
  checkpoint whose config.json names ``base_model`` and ``fc_dropout``; a linear layer on the backbone's first
  token, softmax). The label is the most probable one (``config.id2label``); a row is kept when its label is in
  ``keep_labels`` (NeMo's ``filter_by``; empty: every row is kept, annotated).

Models come from a local directory or a Hugging Face repo id in the model store (never downloaded). A NeMo
checkpoint holds the head's and the backbone's weights but not the backbone's config: ``base_model`` (default:
the name its config.json gives, e.g. microsoft/deberta-v3-base) must be a local directory or a store entry with
that config.json (the backbone's weights are not read).

Texts are cut to ``max_chars`` characters (NeMo's quality classifier uses 6000, the domain one 2000), tokenized
with truncation to ``max_length`` tokens, sorted by token length and run ``batch_size`` at a time, each batch
padded to its longest text (right padding), so little compute goes to padding. ``device: auto`` is CUDA when
torch sees a GPU. ``backend: onnx`` runs ``model.onnx`` (or ``onnx/model.onnx``) of the model directory with
onnxruntime instead of torch (``export_onnx`` writes one). torch, transformers and onnxruntime are imported
lazily.
"""
from __future__ import annotations

import json
import os
from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from ... import models as store
from ...core import columns as C
from ...core import trust
from ...media import inference as inf
from ...registry import register
from ..base import Filter, Params


def is_nemo_config(cfg: dict) -> bool:
    """NeMo Curator's DeBERTa classifier checkpoints (``PyTorchModelHubMixin``): backbone name + dropout."""
    return "base_model" in cfg and "fc_dropout" in cfg and "id2label" in cfg


def _read_config(ref: str) -> dict | None:
    """The model directory's config.json, or None when it cannot be read yet (a store entry not added)."""
    try:
        path = inf.model_dir(ref) if inf.is_local(ref) else store.find(ref)
        if path is None:
            return None
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def task_of(cfg: dict) -> str:
    if is_nemo_config(cfg):
        return "labels"
    n = cfg.get("num_labels") or len(cfg.get("id2label") or {}) or 2
    return "regression" if n == 1 or cfg.get("problem_type") == "regression" else "labels"


def _labels(cfg: dict) -> list[str]:
    """Labels in id order (``id2label``; NeMo sorts ``label2id`` by id, the same order)."""
    id2label = cfg.get("id2label") or {}
    if not id2label and cfg.get("label2id"):
        id2label = {v: k for k, v in cfg["label2id"].items()}
    return [str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}"))) for i in range(len(id2label))]


class _NemoHead:
    """NeMo Curator's ``Deberta`` module rebuilt from its parts: backbone (from its config), a dropout (an
    identity in eval) and ``fc`` on the first token. ``logits(**enc)`` returns the head's logits."""

    def __init__(self, backbone_dir: str, path: str, cfg: dict, trust_remote_code: bool):
        import torch
        import transformers
        bcfg = transformers.AutoConfig.from_pretrained(backbone_dir, local_files_only=True,
                                                       trust_remote_code=trust_remote_code)

        class Module(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = transformers.AutoModel.from_config(bcfg, trust_remote_code=trust_remote_code)
                self.dropout = torch.nn.Dropout(cfg["fc_dropout"])
                self.fc = torch.nn.Linear(bcfg.hidden_size, len(cfg["id2label"]))

            def forward(self, input_ids, attention_mask):
                hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
                return self.fc(self.dropout(hidden))[:, 0, :]

        self.module = Module()
        state = _state_dict(path)
        missing, unexpected = self.module.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.endswith("position_ids")]
        if missing or unexpected:
            raise ValueError(f"{path}: the weights do not fit {bcfg.model_type} + fc (missing {missing[:3]}, "
                             f"unexpected {list(unexpected)[:3]}); is base_model the right backbone?")
        self.module.eval()


def _state_dict(path: str) -> dict:
    st = os.path.join(path, "model.safetensors")
    if os.path.isfile(st):
        from safetensors.torch import load_file
        return load_file(st)
    pt = os.path.join(path, "pytorch_model.bin")
    if os.path.isfile(pt):
        import torch
        return torch.load(pt, map_location="cpu", weights_only=True)
    raise ValueError(f"{path}: no model.safetensors or pytorch_model.bin")


class TextClassifier:
    """A loaded classifier: ``logits(texts)`` → (n, num_labels) float32, batched by token length."""

    def __init__(self, ref: str, device: str = "auto", backend: str = "torch", base_model: str | None = None,
                 max_length: int | None = None, batch_size: int = 32, trust_remote_code: bool = False,
                 dtype: str = "float32"):
        import transformers
        inf._quiet_transformers()
        remote = trust.remote_code_allowed(trust_remote_code)
        self.path = inf.model_dir(ref)
        with open(os.path.join(self.path, "config.json"), encoding="utf-8") as f:
            self.cfg = json.load(f)
        self.task, self.labels = task_of(self.cfg), _labels(self.cfg)
        self.batch_size = batch_size
        self.dtype = dtype
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.path, local_files_only=True,
                                                                    trust_remote_code=remote)
        self.tokenizer.padding_side = "right"
        self.backend = backend
        self.module = None
        self.session = None
        self.nemo = is_nemo_config(self.cfg)
        if backend == "onnx":
            self._load_onnx(device)
            limit = None
        else:
            import torch
            if inf.model_threads():
                torch.set_num_threads(inf.model_threads())
            self.device = inf.pick_device(device)
            if self.nemo:
                backbone = base_model or self.cfg["base_model"]
                bdir = backbone_dir(backbone)
                self.module = _NemoHead(bdir, self.path, self.cfg, remote).module.to(self.device)
                limit = getattr(self.module.model.config, "max_position_embeddings", None)
            else:
                model = transformers.AutoModelForSequenceClassification.from_pretrained(
                    self.path, local_files_only=True, trust_remote_code=remote)
                self.module = model.eval().to(self.device)
                limit = getattr(model.config, "max_position_embeddings", None)
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if max_length is None:
            max_length = tok_max if tok_max and tok_max < 1_000_000 else (limit or 512)
        self.max_length = int(max_length)

    def _load_onnx(self, device: str) -> None:
        import onnxruntime as ort
        cands = [os.path.join(self.path, "model.onnx"), os.path.join(self.path, "onnx", "model.onnx")]
        onnx_path = next((p for p in cands if os.path.isfile(p)), None)
        if onnx_path is None:
            raise ValueError(f"backend onnx: no model.onnx (or onnx/model.onnx) in {self.path}; write one with "
                             f"gristmill.ops.classify.hf_text_classifier.export_onnx")
        opts = ort.SessionOptions()
        if inf.model_threads():
            opts.intra_op_num_threads = inf.model_threads()
        providers = ["CPUExecutionProvider"]
        if device != "cpu" and "CUDAExecutionProvider" in ort.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        self.session = ort.InferenceSession(onnx_path, opts, providers=providers)
        self.onnx_inputs = [i.name for i in self.session.get_inputs()]

    def encode(self, texts: list[str]) -> dict:
        return self.tokenizer(texts, truncation=True, max_length=self.max_length)

    def logits(self, texts: list[str]) -> np.ndarray:
        n_out = 1 if self.task == "regression" else max(len(self.labels), 1)
        out = np.zeros((len(texts), n_out), dtype=np.float32)
        if not texts:
            return out
        enc = self.encode(texts)
        keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc]
        lengths = np.array([len(x) for x in enc["input_ids"]])
        order = np.argsort(lengths, kind="stable")  # similar lengths together: little padding
        for s in range(0, len(order), self.batch_size):
            idx = order[s:s + self.batch_size]
            part = self.tokenizer.pad({k: [enc[k][i] for i in idx] for k in keys}, padding="longest",
                                      return_tensors="np")
            out[idx] = self._forward(part)
        return out

    def _forward(self, part: dict) -> np.ndarray:
        if self.session is not None:
            feed = {k: np.asarray(part[k], dtype=np.int64) for k in self.onnx_inputs if k in part}
            return np.asarray(self.session.run(None, feed)[0], dtype=np.float32)
        import contextlib

        import torch
        cast = (torch.autocast(torch.device(self.device).type, dtype=getattr(torch, self.dtype))
                if self.dtype != "float32" else contextlib.nullcontext())
        with torch.inference_mode(), cast:
            if self.nemo:
                res = self.module(torch.as_tensor(part["input_ids"], device=self.device),
                                  torch.as_tensor(part["attention_mask"], device=self.device))
            else:
                res = self.module(**{k: torch.as_tensor(v, device=self.device) for k, v in part.items()}).logits
            return res.float().cpu().numpy()


def backbone_dir(name: str) -> str:
    """The directory holding a NeMo checkpoint's backbone config: a local directory, or a store entry."""
    if inf.is_local(name):
        return inf.model_dir(name)
    if store.is_hf_dir_name(name) and store.find(name) is not None:
        return str(store.find(name))
    raise store.ModelMissing(f"base_model: the backbone {name!r} of this NeMo classifier is not in the model store "
                             f"{store.store_dir()}: its config.json is needed (`gristmill models add {name} DIR` "
                             f"with DIR from `huggingface-cli download {name} config.json --local-dir DIR`), or set "
                             f"base_model to a local directory")


def export_onnx(model_dir: str, out: str | None = None, base_model: str | None = None) -> str:
    """Write the classifier's logits as an ONNX graph (dynamic batch and length) for ``backend: onnx``;
    default path ``model_dir/model.onnx``. Needs the ``onnx`` package (torch's exporter)."""
    import torch
    clf = TextClassifier(model_dir, device="cpu", base_model=base_model, batch_size=2)
    enc = clf.tokenizer.pad(clf.encode(["an example", "another example text"]), return_tensors="pt")
    names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc]
    if clf.nemo:
        names = ["input_ids", "attention_mask"]
        module = clf.module
    else:
        class Logits(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, *args):
                return self.m(**dict(zip(names, args))).logits
        module = Logits(clf.module)
    out = out or os.path.join(clf.path, "model.onnx")
    axes = {k: {0: "batch", 1: "length"} for k in names}
    axes["logits"] = {0: "batch"}
    torch.onnx.export(module, tuple(enc[k] for k in names), out, input_names=names, output_names=["logits"],
                      dynamic_axes=axes, dynamo=False)
    return out


def softmax(x: np.ndarray) -> np.ndarray:
    z = x.astype(np.float64) - x.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


@register("text_classifier_filter")
class TextClassifierFilter(Filter):
    """Score texts with a Hugging Face sequence classifier and filter on the result. Regression heads
    (FineWeb-Edu): stats ``{stats_prefix}score`` (the raw logit) and ``{stats_prefix}int_score`` (round of the
    score clamped to [0, 5]), kept when ``int_score >= min_score``. Label heads (NeMo's quality / domain
    DeBERTa, any ``*ForSequenceClassification``): stats ``{stats_prefix}label`` (the most probable label) and
    ``{stats_prefix}prob`` (its probability), kept when the label is in ``keep_labels`` (all kept when empty)."""

    inputs = ("{text_key}",)
    version = 1
    requires = ("transformers",)  # the tokenizer and the model; the backend's runtime: missing_libraries

    def missing_libraries(self) -> list[str]:
        from ...core import extras
        return extras.missing((*self.requires, "onnxruntime" if self.params.backend == "onnx" else "torch"))

    class Params(Params):
        hf_model: str = trust.path_param(
            "model", "HuggingFaceFW/fineweb-edu-classifier",
            description="Classifier: a local model directory, or a Hugging Face repo id in the model store "
                        "(HuggingFaceFW/fineweb-edu-classifier, nvidia/quality-classifier-deberta, "
                        "nvidia/domain-classifier...).")
        base_model: str | None = trust.path_param(
            "model", None, description="NeMo DeBERTa checkpoints only: the backbone whose config.json the head "
                                       "sits on (default: the base_model its config.json names).")
        task: Literal["auto", "regression", "labels"] = Field(
            "auto", description="auto: regression for a one-output head, labels otherwise.")
        min_score: int | None = Field(3, description="Regression: keep rows with int_score >= this (None: keep "
                                                     "all).")
        keep_labels: list[str] = Field(default_factory=list, description="Labels: keep rows whose label is one "
                                                                         "of these (empty: keep all).")
        stats_prefix: str = Field("classifier_", description="Prefix of the stats keys (e.g. edu_, quality_).")
        max_chars: int | None = Field(None, ge=1, description="Cut each text to this many characters first.")
        max_length: int | None = Field(None, ge=1, description="Tokens per text (truncation); default: the "
                                                               "tokenizer's model_max_length.")
        batch_size: int = Field(32, ge=1, description="Texts per model call (sorted by token length).")
        device: str = Field("auto", description="'auto' (CUDA when torch sees a GPU), 'cpu', 'cuda', 'cuda:1'.")
        backend: Literal["torch", "onnx"] = Field("torch", description="onnx: run the directory's model.onnx "
                                                                      "with onnxruntime.")
        dtype: Literal["float32", "float16", "bfloat16"] = Field(
            "float32", description="torch: run under autocast in this type (NeMo Curator autocasts on GPUs; "
                                   "float16 / bfloat16 are faster there, scores move slightly).")
        trust_remote_code: bool = Field(False, description="Let transformers run code shipped with the model.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        inf.check_ref(p.hf_model, "hf_model")
        cfg = _read_config(p.hf_model)
        self.task = p.task if p.task != "auto" else (task_of(cfg) if cfg else "regression")
        if cfg and is_nemo_config(cfg) and p.backend == "torch" and store.checking():
            backbone_dir(p.base_model or cfg["base_model"])  # a missing backbone config: refused before any work
        pre = p.stats_prefix
        self.stats_keys = (pre + "score", pre + "int_score") if self.task == "regression" else (pre + "label",
                                                                                                 pre + "prob")

    def models(self) -> list[str]:
        names = inf.store_names(self.params.hf_model)
        base = self.params.base_model
        if base is None and self.params.backend == "torch":
            cfg = _read_config(self.params.hf_model)
            base = cfg.get("base_model") if cfg and is_nemo_config(cfg) else None
        if base and not inf.is_local(base):
            names.append(base)
        return names

    def _clf(self) -> TextClassifier:
        p = self.params
        return self.resource("model", lambda: TextClassifier(
            p.hf_model, device=p.device, backend=p.backend, base_model=p.base_model, max_length=p.max_length,
            batch_size=p.batch_size, trust_remote_code=p.trust_remote_code, dtype=p.dtype))

    def compute_stats(self, batch):
        p = self.params
        clf = self._clf()
        texts = [t or "" for t in self.text(batch).to_pylist()]
        if p.max_chars:
            texts = [t[:p.max_chars] for t in texts]
        logits = clf.logits(texts)
        k1, k2 = self.stats_keys
        if self.task == "regression":
            score = logits[:, 0].astype(np.float64)
            int_score = np.rint(np.clip(score, 0.0, 5.0)).astype(np.int64)
            return C.with_stats(batch, {k1: score, k2: int_score})
        probs = softmax(logits)
        best = probs.argmax(axis=1)
        labels = [clf.labels[i] if i < len(clf.labels) else f"LABEL_{i}" for i in best]
        return C.with_stats(batch, {k1: pa.array(labels, pa.string()),
                                    k2: probs[np.arange(len(best)), best]})

    def keep(self, batch):
        p = self.params
        k1, k2 = self.stats_keys
        if self.task == "regression":
            if p.min_score is None:
                return np.ones(batch.num_rows, bool)
            return C.get_stat(batch, k2).to_numpy(zero_copy_only=False) >= p.min_score
        if not p.keep_labels:
            return np.ones(batch.num_rows, bool)
        lab = C.get_stat(batch, k1).to_numpy(zero_copy_only=False).astype(object)
        return np.isin(lab, p.keep_labels)

    def reason(self, removed):
        k1, k2 = self.stats_keys
        if self.task == "regression":
            return f"{k2} < {self.params.min_score}"
        return f"{k1} not in keep_labels"

    def thresholds(self):
        return {self.stats_keys[1]: ("min_score", None)} if self.task == "regression" else {}
