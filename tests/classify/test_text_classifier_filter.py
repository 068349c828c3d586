"""text_classifier_filter on tiny random Hugging Face classifiers built here from configs (a BERT regression head
as FineWeb-Edu's, a NeMo Curator DeBERTa checkpoint as nvidia/quality-classifier-deberta's) with a WordPiece
tokenizer trained here, saved to directories and loaded the way users load them (a path, or the model store)."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from gristmill.registry import create_op  # noqa: E402

TEXTS = [
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "Buy cheap watches now!!! Free shipping, click here.",
    "The French Revolution began in 1789 and reshaped European politics for a century.",
    "lol",
    "",
    "In mathematics, a prime number is a natural number greater than 1 that has no positive divisors other than "
    "1 and itself. " * 6,
    "Login | Register | Cart (0) | Checkout",
    "Water boils at 100 degrees Celsius at sea level; at altitude the boiling point is lower.",
]


def make_tokenizer(max_len: int = 64):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from tokenizers.processors import TemplateProcessing
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(TEXTS * 3, trainers.WordPieceTrainer(
        vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    tok.post_processor = TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[
        ("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return transformers.BertTokenizerFast(tokenizer_object=tok, model_max_length=max_len)


@pytest.fixture(scope="module")
def edu_dir(tmp_path_factory):
    """A FineWeb-Edu-shaped regression classifier: BertForSequenceClassification, one output."""
    d = tmp_path_factory.mktemp("edu")
    tok = make_tokenizer()
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=64, num_labels=1,
                                  problem_type="regression")
    model = transformers.BertForSequenceClassification(cfg).eval()
    with torch.no_grad():  # a head along the texts' main direction, spreading the scores over about -0.5..5.5
        enc = tok(TEXTS, padding=True, truncation=True, return_tensors="pt")
        pooled = model.bert(**enc).pooler_output.double()
        centre = pooled.mean(0)
        v = torch.linalg.svd(pooled - centre, full_matrices=False).Vh[0]
        proj = (pooled - centre) @ v
        w = v * (6.0 / float(proj.max() - proj.min()))
        model.classifier.weight.copy_(w[None, :].float())
        model.classifier.bias.fill_(float(2.5 - centre @ w))
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


def ref_regression(d, texts, max_length=64):
    tok = transformers.AutoTokenizer.from_pretrained(d)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(d).eval()
    out = []
    with torch.no_grad():
        for t in texts:  # one text at a time: no padding at all
            enc = tok(t, truncation=True, max_length=max_length, return_tensors="pt")
            out.append(float(model(**enc).logits[0, 0]))
    return np.array(out)


def test_regression_head_fineweb_edu_rule(edu_dir):
    ref = ref_regression(edu_dir, TEXTS)
    want_int = [int(round(max(0.0, min(s, 5.0)))) for s in ref]
    assert len(set(want_int)) >= 3  # the test model spreads its scores
    op = create_op("text_classifier_filter", {"hf_model": str(edu_dir), "min_score": 3, "stats_prefix": "edu_",
                                              "batch_size": 3})
    assert op.stats_keys == ("edu_score", "edu_int_score") and op.models() == []
    kept, removed = op.apply([{"text": t} for t in TEXTS], removed=True)
    rows = {r["text"]: r["__stats__"] for r in kept + removed}
    for t, s, i in zip(TEXTS, ref, want_int):
        assert rows[t]["edu_score"] == pytest.approx(s, abs=1e-4)
        assert rows[t]["edu_int_score"] == i
    assert [r["text"] for r in kept] == [t for t, i in zip(TEXTS, want_int) if i >= 3]
    assert {r["__reason__"] for r in removed} == {"edu_int_score < 3"}
    # batching by token length does not change the numbers (batch of 1 vs 8)
    one = create_op("text_classifier_filter", {"hf_model": str(edu_dir), "min_score": None, "batch_size": 1,
                                               "device": "cpu"})
    got = [r["__stats__"]["classifier_score"] for r in one.apply([{"text": t} for t in TEXTS])]
    assert got == pytest.approx([rows[t]["edu_score"] for t in TEXTS], abs=1e-4)
    # max_chars cuts the text first
    cut = create_op("text_classifier_filter", {"hf_model": str(edu_dir), "min_score": None, "max_chars": 20})
    got = cut.apply([{"text": TEXTS[5]}])[0]["__stats__"]["classifier_score"]
    assert got == pytest.approx(ref_regression(edu_dir, [TEXTS[5][:20]])[0], abs=1e-4)


class NemoDeberta(torch.nn.Module):
    """NeMo Curator's classifier layout (backbone ``model``, ``dropout``, ``fc``), written here as the reference."""

    def __init__(self, bcfg, n_labels):
        super().__init__()
        self.model = transformers.AutoModel.from_config(bcfg)
        self.dropout = torch.nn.Dropout(0.2)
        self.fc = torch.nn.Linear(bcfg.hidden_size, n_labels)

    def forward(self, input_ids, attention_mask):
        h = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return torch.softmax(self.fc(self.dropout(h))[:, 0, :], dim=1)


@pytest.fixture(scope="module")
def nemo(tmp_path_factory):
    from safetensors.torch import save_file
    root = tmp_path_factory.mktemp("nemo")
    tok = make_tokenizer(128)
    torch.manual_seed(1)
    bcfg = transformers.DebertaV2Config(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2,
                                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
                                        relative_attention=True, position_buckets=16,
                                        pos_att_type=["p2c", "c2p"], position_biased_input=False)
    backbone = root / "backbone"
    bcfg.save_pretrained(backbone)  # the backbone's config only, as users add microsoft/deberta-v3-base
    module = NemoDeberta(bcfg, 3).eval()
    with torch.no_grad():  # High / Medium / Low along the texts' main direction, so all three labels occur
        enc = tok(TEXTS, padding=True, truncation=True, return_tensors="pt")
        h = module.model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state[:, 0]
        h = h.double()
        centre = h.mean(0)
        v = torch.linalg.svd(h - centre, full_matrices=False).Vh[0]
        proj = (h - centre) @ v
        w = v * (8.0 / float(proj.max() - proj.min()))
        module.fc.weight.copy_(torch.stack([w, torch.zeros_like(w), -w]).float())
        module.fc.bias.copy_(torch.tensor([float(-centre @ w) - 1.0, 0.0, float(centre @ w) - 1.0]))
    ckpt = root / "quality"
    ckpt.mkdir()
    save_file({k: v.contiguous() for k, v in module.state_dict().items()}, str(ckpt / "model.safetensors"))
    labels = {"0": "High", "1": "Medium", "2": "Low"}
    (ckpt / "config.json").write_text(json.dumps({
        "base_model": "microsoft/deberta-v3-base", "fc_dropout": 0.2, "id2label": labels,
        "label2id": {v: int(k) for k, v in labels.items()}}))
    tok.save_pretrained(ckpt)
    return {"module": module, "ckpt": ckpt, "backbone": backbone, "tok": tok}


def ref_nemo(nemo, texts, max_length=128):
    out = []
    with torch.no_grad():
        for t in texts:
            enc = nemo["tok"](t, truncation=True, max_length=max_length, return_tensors="pt")
            out.append(nemo["module"](enc["input_ids"], enc["attention_mask"])[0].numpy())
    return np.array(out)


def test_nemo_deberta_labels_from_the_model_store(nemo, tmp_path, monkeypatch):
    from gristmill import models
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path / "store"))
    models.add("nvidia/quality-classifier-deberta", str(nemo["ckpt"]))
    params = {"hf_model": "nvidia/quality-classifier-deberta", "keep_labels": ["High", "Medium"],
              "stats_prefix": "quality_", "max_chars": 6000, "batch_size": 4}
    # the backbone's config is needed and missing: refused before any work, with the fix
    with pytest.raises(ValueError, match="gristmill models add microsoft/deberta-v3-base DIR"):
        create_op("text_classifier_filter", params)
    models.add("microsoft/deberta-v3-base", str(nemo["backbone"]))
    op = create_op("text_classifier_filter", params)
    assert op.stats_keys == ("quality_label", "quality_prob")
    assert op.models() == ["nvidia/quality-classifier-deberta", "microsoft/deberta-v3-base"]
    probs = ref_nemo(nemo, TEXTS)
    names = np.array(["High", "Medium", "Low"])
    want = names[probs.argmax(axis=1)]
    assert len(set(want)) >= 2
    kept, removed = op.apply([{"text": t} for t in TEXTS], removed=True)
    rows = {r["text"]: r["__stats__"] for r in kept + removed}
    for t, p, lab in zip(TEXTS, probs, want):
        assert rows[t]["quality_label"] == lab
        assert rows[t]["quality_prob"] == pytest.approx(float(p.max()), abs=1e-5)
    assert [r["text"] for r in kept] == [t for t, lab in zip(TEXTS, want) if lab in ("High", "Medium")]
    assert {r["__reason__"] for r in removed} <= {"quality_label not in keep_labels"}
    # base_model given as a local directory instead of the store entry
    op2 = create_op("text_classifier_filter", {"hf_model": str(nemo["ckpt"]), "base_model": str(nemo["backbone"])})
    assert op2.task == "labels" and len(op2.apply([{"text": t} for t in TEXTS])) == len(TEXTS)


def test_refusals(edu_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path / "store"))
    with pytest.raises(ValueError, match="gristmill models add HuggingFaceFW/fineweb-edu-classifier DIR"):
        create_op("text_classifier_filter", {})
    with pytest.raises(ValueError, match="no config.json"):
        create_op("text_classifier_filter", {"hf_model": str(tmp_path)})
    pytest.importorskip("onnxruntime")
    op = create_op("text_classifier_filter", {"hf_model": str(edu_dir), "backend": "onnx"})
    with pytest.raises(ValueError, match="no model.onnx"):
        op.apply([{"text": "x"}])


def test_device_auto_asks_for_a_gpu_and_a_recipe_runs_it(edu_dir, tmp_path):
    assert create_op("text_classifier_filter", {"hf_model": str(edu_dir)}).resources.gpus == 1.0
    assert create_op("text_classifier_filter", {"hf_model": str(edu_dir), "device": "cpu"}).resources.gpus == 0.0
    from gristmill import Dataset
    ref = ref_regression(edu_dir, TEXTS)
    rows = [{"id": i, "text": t} for i, t in enumerate(TEXTS)]
    op = create_op("text_classifier_filter", {"hf_model": str(edu_dir), "min_score": 3, "stats_prefix": "edu_"})
    out = Dataset.from_list(rows).process(op).to_list(np=2)
    assert sorted(r["id"] for r in out) == [i for i, s in enumerate(ref) if round(max(0, min(s, 5))) >= 3]


def test_onnx_backend_matches_torch(edu_dir, tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import shutil

    from gristmill.ops.classify.hf_text_classifier import export_onnx
    d = tmp_path / "edu"
    shutil.copytree(edu_dir, d)
    export_onnx(str(d))
    rows = [{"text": t} for t in TEXTS]
    a = create_op("text_classifier_filter", {"hf_model": str(d), "min_score": None}).apply(rows)
    b = create_op("text_classifier_filter", {"hf_model": str(d), "min_score": None, "backend": "onnx"}).apply(rows)
    assert [r["__stats__"]["classifier_score"] for r in b] == pytest.approx(
        [r["__stats__"]["classifier_score"] for r in a], abs=1e-4)


def test_autocast_dtype_follows_float32(edu_dir):
    rows = [{"text": t} for t in TEXTS]
    a = create_op("text_classifier_filter", {"hf_model": str(edu_dir), "min_score": None, "device": "cpu"}).apply(rows)
    b = create_op("text_classifier_filter", {"hf_model": str(edu_dir), "min_score": None, "device": "cpu",
                                             "dtype": "bfloat16"}).apply(rows)
    sa = [r["__stats__"]["classifier_score"] for r in a]
    sb = [r["__stats__"]["classifier_score"] for r in b]
    # bfloat16 keeps ~3 digits and the test head magnifies them; the scores still follow the float32 ones
    assert sb != sa and np.corrcoef(sa, sb)[0, 1] > 0.95
