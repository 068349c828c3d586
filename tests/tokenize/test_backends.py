import gzip
import json
import os
import shutil

import numpy as np
import pytest
from tokhelpers import TEXTS, make_docs

from gristmill.tokenize.backends import (
    TokenizerError,
    load_tokenizer,
    packaged_tiktoken,
    tiktoken_from_hf,
    token_dtype,
    verify,
)
from gristmill.tokenize.check import choose_backend


def test_fast_path_ids_equal_reference(tok_json):
    spec = load_tokenizer(tok_json)
    ref, fast = spec.reference(), spec.fast()
    assert fast is not None and fast.name == "tiktoken"
    docs = make_docs(100, 3) + TEXTS + ["<|im_start|>user\nhello<|im_end|>\n", "e\u0301te\u0301 cafe\u0301"]
    v = verify(ref, fast, docs)
    assert v.ok and v.docs == len(docs)
    # the special tokens written in text are matched like Hugging Face does
    ids = fast.encode("<|im_start|>user")
    assert ids[0] == spec.token_id("<|im_start|>") == 1
    # NFC: a decomposed é encodes like the composed one
    assert fast.encode("e\u0301") == fast.encode("\u00e9") == ref.encode("\u00e9")


def test_gzipped_json_and_directory(tok_json, tmp_path):
    gz = tmp_path / "tokenizer.json.gz"
    with open(tok_json, "rb") as f, gzip.open(gz, "wb") as g:
        g.write(f.read())
    d = tmp_path / "dir"
    d.mkdir()
    shutil.copy(tok_json, d / "tokenizer.json")
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    a, b, c = load_tokenizer(tok_json), load_tokenizer(str(gz)), load_tokenizer(str(d))
    assert a.fingerprint == b.fingerprint == c.fingerprint
    assert c.default_eos() == "<|im_end|>" and a.default_eos() == "<|endoftext|>"
    assert b.reference().encode(TEXTS[2]) == a.reference().encode(TEXTS[2])


def test_no_fast_path_for_other_normalisers(tok_json, tmp_path):
    data = json.load(open(tok_json))
    data["normalizer"] = {"type": "Lowercase"}
    p = tmp_path / "lower.json"
    p.write_text(json.dumps(data))
    spec = load_tokenizer(str(p))
    assert spec.fast() is None and "normalizer" in spec.fast_unavailable
    backend, info = choose_backend(spec, "auto", TEXTS)
    assert backend == "hf" and "no fast path" in info["reason"]
    with pytest.raises(TokenizerError):
        choose_backend(spec, "tiktoken", TEXTS)
    assert isinstance(tiktoken_from_hf(data), str)


class _Wrong:
    """A fast backend that disagrees on texts containing a digit."""
    name = "tiktoken"

    def __init__(self, inner):
        self.inner = inner
        self.vocab_size = inner.vocab_size

    def encode_batch(self, texts):
        flat, lens = self.inner.encode_batch(texts)
        flat = flat.copy()
        off = np.concatenate([[0], np.cumsum(lens)])
        for i, t in enumerate(texts):
            if any(ch.isdigit() for ch in t):
                flat[off[i]] = (flat[off[i]] + 1) % 500
        return flat, lens


def test_mismatch_falls_back_or_fails(tok_json):
    spec = load_tokenizer(tok_json)
    spec.__dict__["_fast"] = [_Wrong(spec.fast())]
    assert choose_backend(spec, "auto", ["no digits here"])[0] == "tiktoken"
    backend, info = choose_backend(spec, "auto", TEXTS)
    assert backend == "hf" and info["mismatched_docs"] == 4 and "rejected" in info["reason"]
    with pytest.raises(TokenizerError, match="differ"):
        choose_backend(spec, "tiktoken", TEXTS)
    assert choose_backend(spec, "auto", [])[0] == "hf"  # nothing verified: no fast path


def test_qwen_tiktoken_from_package():
    path = packaged_tiktoken("qwen.tiktoken")
    assert path and os.path.getsize(path) > 1_000_000
    spec = load_tokenizer("qwen.tiktoken")
    assert spec.kind == "tiktoken" and spec.token_id("<|endoftext|>") == 151643
    assert spec.token_id("<|im_end|>") == 151645
    enc = spec.reference()
    assert enc.vocab_size == 151851
    assert enc.encode("Hello world") == [9707, 1879]
    assert token_dtype(enc.vocab_size) == np.int32 and token_dtype(600) == np.uint16
    with pytest.raises(TokenizerError):
        load_tokenizer("no-such.tiktoken")


def test_fast_path_conversion_is_cached(tok_json, tmp_path, monkeypatch):
    monkeypatch.setenv("GRISTMILL_CACHE", str(tmp_path))
    a = load_tokenizer(tok_json)
    fa = a.fast()  # miss: converts and stores
    files = list(tmp_path.rglob("*.pkl"))
    assert len(files) == 1 and a.fingerprint in files[0].name
    b = load_tokenizer(tok_json)
    assert "_data" not in b.__dict__  # hit: the JSON is not even parsed
    assert b.specials == a.specials and b.fast().encode(TEXTS[2]) == fa.encode(TEXTS[2])
    files[0].write_bytes(b"not a pickle")  # a broken cache entry is ignored
    c = load_tokenizer(tok_json)
    assert c.fast().encode(TEXTS[0]) == fa.encode(TEXTS[0])


def test_nfc_quick_check_encodes_like_normalising_every_text(tok_json):
    """The fast path normalises only texts the quick check flags; ids equal NFC of every text."""
    import unicodedata
    fast = load_tokenizer(tok_json).fast()
    docs = ["caf\u00e9", "cafe\u0301", "A\u030a \u212b", "\u1100\u1161 \uac00", "x\u0345\u0301", "plain ascii", "\u2019quoted\u201d"]
    ids, lens = fast.encode_batch(docs)
    want, wlens = fast.encode_batch([unicodedata.normalize("NFC", d) for d in docs])
    assert np.array_equal(ids, want) and np.array_equal(lens, wlens)
    assert fast.encode("cafe\u0301") == fast.encode("caf\u00e9")


def test_run_setup_builds_no_encoder_and_loads_the_tokenizer_once(tok_json, tmp_path, monkeypatch):
    monkeypatch.setenv("GRISTMILL_CACHE", str(tmp_path))
    load_tokenizer(tok_json).fast()  # the conversion cache entry
    a = load_tokenizer(tok_json)
    assert a.has_fast() and "_fast" not in a.__dict__  # known without building tiktoken's encoder
    assert a.vocab_size == a.fast().vocab_size  # from the conversion, not a parse of the JSON
    assert "_data" not in a.__dict__
    from gristmill.tokenize import backends
    loads = []
    real_load = backends._cache_load
    monkeypatch.setattr(backends, "_cache_load", lambda fp: loads.append(fp) or real_load(fp))
    b = load_tokenizer(tok_json)  # the same bytes again: the spec of a moment ago, its backends not shared
    assert loads == []
    assert b.fingerprint == a.fingerprint and b.specials == a.specials and "_fast" not in b.__dict__
    assert b.fast().encode(TEXTS[1]) == a.fast().encode(TEXTS[1])
    with open(tok_json, "rb") as f:
        raw = f.read()
    changed = tmp_path / "tok" / "tokenizer.json"
    changed.parent.mkdir()
    changed.write_bytes(raw.replace(b'"<|im_start|>"', b'"<|im_begin|>"'))
    c = load_tokenizer(str(changed))  # other bytes: loaded anew
    assert c.fingerprint != a.fingerprint and "<|im_begin|>" in c.specials
