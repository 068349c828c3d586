"""Code-point class tables and UTF-8 decoding shared by the compiled text kernels.

Every kernel works on a whole Arrow string column at once: the column's UTF-8 buffer is decoded once
into a flat array of code points (``decode``), and character tests become lookups in one bit-flag table
indexed by code point. The table is built lazily from Python's own ``str`` predicates so that our
character classes are exactly those of the peers (datatrove, Data-Juicer), which use the same predicates.
"""
from __future__ import annotations

import string
import sys
import unicodedata
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...cache import cached_arrays
from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)

# flag bits
SPACE = 1 << 0        # str.isspace
ALPHA = 1 << 1        # str.isalpha
ALNUM = 1 << 2        # str.isalnum
DIGIT = 1 << 3        # ASCII 0-9
LOWER = 1 << 4        # lower-case letter or a letter of a caseless script (spaCy's ALPHA_LOWER)
UPPER = 1 << 5        # upper-case letter or a letter of a caseless script (spaCy's ALPHA_UPPER)
DT_PUNCT = 1 << 6     # datatrove's PUNCTUATION_SET (symbol-word test)
TERM = 1 << 7         # Unicode Sentence_Terminal (datatrove TERMINAL_PUNCTUATION / spaCy sentencizer)
PCAT = 1 << 8         # Unicode category P* (spaCy is_punct)
AFFIX = 1 << 9        # spaCy single-char prefix/suffix punctuation, quotes, currency
QUOTE = 1 << 10       # spaCy quote characters
ICON = 1 << 11        # Unicode category So (spaCy LIST_ICONS)
CURRENCY = 1 << 12
DJ_SPECIAL = 1 << 13  # Data-Juicer SPECIAL_CHARACTERS (punctuation, digits, whitespace, symbols, emoji)
LINEBREAK = 1 << 14   # str.splitlines boundaries
CJK = 1 << 15         # Han, kana, hangul, CJK punctuation: scripts written without spaces
DJ_WS = 1 << 16       # Data-Juicer VARIOUS_WHITESPACES
SP_ALPHA = 1 << 17    # spaCy's ALPHA: cased Latin/Greek/Cyrillic letters plus whole blocks of caseless scripts

# blocks of scripts without case that spaCy counts as both lower- and upper-case letters
_CASELESS_BLOCKS = ((0x1200, 0x137F), (0x0980, 0x09FF), (0x0591, 0x05F4), (0xFB1D, 0xFB4F), (0x0620, 0x064A),
                    (0x066E, 0x06D5), (0x06E5, 0x06FF), (0x0750, 0x077F), (0x08A0, 0x08BD), (0xFB50, 0xFBB1),
                    (0xFBD3, 0xFD3D), (0xFD50, 0xFDC7), (0xFDF0, 0xFDFB), (0xFE70, 0xFEFC), (0x1EE00, 0x1EEBB),
                    (0x0D80, 0x0DFF), (0x0900, 0x097F), (0x0C80, 0x0CFF), (0x0B80, 0x0BFF), (0x0C00, 0x0C7F),
                    (0xAC00, 0xD7AF), (0x1100, 0x11FF), (0x3040, 0x309F), (0x30A0, 0x30FF), (0x4E00, 0x9FFF),
                    (0x3400, 0x4DBF), (0x20000, 0x2EBEF), (0x2E80, 0x2FFF), (0x3000, 0x303F), (0x31C0, 0x31EF),
                    (0x3200, 0x33FF), (0xF900, 0xFAFF), (0xFE30, 0xFE4F), (0x1F200, 0x1F2FF), (0x2F800, 0x2FA1F))
# blocks whose cased letters spaCy knows (Latin incl. extensions and full-width, IPA, Greek, Cyrillic)
_CASED_BLOCKS = ((0x41, 0x24F), (0x250, 0x2AF), (0x370, 0x3FF), (0x400, 0x4FF), (0x1D00, 0x1DBF), (0x1E00, 0x1EFF),
                 (0x2C60, 0x2C7F), (0xA720, 0xA7FF), (0xAB30, 0xAB6F), (0xFF21, 0xFF5A))

# Unicode Sentence_Terminal, as used by datatrove (TERMINAL_PUNCTUATION) and spaCy's sentencizer
SENTENCE_TERMINALS = [int(x, 16) for x in (
    "21 2e 3f 589 61d 61e 61f 6d4 700 701 702 7f9 837 839 83d 83e 964 965 104a 104b 1362 1367 1368 166e "
    "1735 1736 17d4 17d5 17d6 17d9 17da 1803 1809 1944 1945 1aa8 1aa9 1aaa 1aab 1b5a 1b5b 1b5e 1b5f 1b7d "
    "1b7e 1c3b 1c3c 1c7e 1c7f 203c 203d 2047 2048 2049 2e2e 2e3c 2e53 2e54 3002 a4ff a60e a60f a6f3 a6f7 "
    "a876 a877 a8ce a8cf a92f a9c8 a9c9 aa5d aa5e aa5f aaf0 aaf1 abeb fe52 fe56 fe57 ff01 ff0e ff1f ff61 "
    "10a56 10a57 10f55 10f56 10f57 10f58 10f59 10f86 10f87 10f88 10f89 11047 11048 110be 110bf 110c0 110c1 "
    "11141 11142 11143 111c5 111c6 111cd 111de 111df 11238 11239 1123b 1123c 112a9 1144b 1144c 115c2 115c3 "
    "115c9 115ca 115cb 115cc 115cd 115ce 115cf 115d0 115d1 115d2 115d3 115d4 115d5 115d6 115d7 11641 11642 "
    "1173c 1173d 1173e 11944 11946 11a42 11a43 11a9b 11a9c 11c41 11c42 11ef7 11ef8 11f43 11f44 16a6e 16a6f "
    "16af5 16b37 16b38 16b44 16e98 1bc9f 1da88").split()]

# datatrove's PUNCTUATION string (ASCII/CJK/typographic marks and C0/C1 controls except \t and \n)
DT_PUNCTUATION = ("!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
                  + "".join(chr(x) for a, b in ((0, 9), (11, 13), (13, 32), (127, 160)) for x in range(a, b)))

# spaCy's punctuation, quote and currency affix characters (single code points)
SP_PUNCT = "…,:;!?¿؟¡()[]{}<>_#*&。？！，、；：～·।،۔؛٪"
SP_QUOTES = "'\"”“`‘´’‚,„»«「」『』（）〔〕【】《》〈〉〈〉⟦⟧"
SP_CURRENCY = "$£€¥฿₽﷼₴₠₡₢₣₤₥₦₧₨₩₪₫€₭₮₯₰₱₲₳₴₵₶₷₸₹₺₻₼₽₾₿"
SP_PREFIX_EXTRA = "§%=—–"

# Data-Juicer's SPECIAL_CHARACTERS, besides string.punctuation/digits/whitespace and emoji
DJ_OTHER_SPECIAL = ("    　    ￼’“”–ー一▬…✦�­£​•€«»°·═×士＾˘⇓↓↑←→（）§″′´¿−±∈﻿¢ø‚„½¼¾¹²³―⁃，ˌ¸‹›ʺˈʻ¦‐⠀‰‑≤≥‖"
                    "◆●■►▼▲▴∆▻¡★☆✱ːº。¯˜¥ɪ≈†上ン：∼⁄・♡✓⊕․．⋅÷１‟；،、¨ाাी्े◦˚゜ʼ≖ʼ¤ッツシ℃√！【】‿∞➤～πه۩☛₨➩☻๑٪♥ıॽ《‘©﴿٬？▷Г♫∟™ª₪®「—❖」﴾》")
DJ_WHITESPACES = (" \t\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f"
                  "\u3000\u200b\u200c\u200d\u2060\ufffc\u0084")

LINEBREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"

N_CP = 0x110000


def _emoji_chars() -> set[int]:
    """Single-code-point emoji (Data-Juicer strips those as special characters)."""
    try:
        import emoji
    except ImportError:  # pragma: no cover - emoji is a declared dependency
        return set()
    return {ord(e) for e in emoji.EMOJI_DATA if len(e) == 1}


def _ranges(spec: str) -> np.ndarray:
    """Code points of a "3ac-3af 3b1 ..." hex range list."""
    out = []
    for part in spec.split():
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo, 16), int(hi or lo, 16) + 1))
    return np.array(out, np.int64)


# spaCy lists Greek and Cyrillic letters by language (Greek, Russian, Ukrainian, Tatar, Macedonian), not the
# whole blocks; these are the letters it knows, by case
_GREEK_CYR_LOWER = "3ac-3af 3b1-3c9 3cc-3ce 430-451 453-45a 45c-45d 491 497 4a3 4af 4bb 4d9 4e9"
_GREEK_CYR_UPPER = "386 388-38a 38c 38e-38f 391-3a9 400-401 403-40a 40c-40d 410-42f 490 496 4a2 4ae 4ba 4d8 4e8"
# lower-case letters Python knows in the Latin/IPA blocks that spaCy's lists (older Unicode) lack, and
# unassigned gaps inside its caseless blocks
_NOT_SPACY_LETTERS = ("aa b5 ba 1c0-1c3 1d26-1d6a 1d78 1d9b-1dbf 2c7c-2c7d 2fe0-2fef a770 a788 a78f a7ba-a7ca "
                      "a7d0-a7d9 a7f2-a7f9 a7fb-a7ff ab5c-ab5f ab65-ab69 2a6e0-2a6ff")


def _spacy_letter_fixes(t: np.ndarray) -> None:
    """Make LOWER / UPPER / SP_ALPHA exactly spaCy's ALPHA_LOWER / ALPHA_UPPER / ALPHA (checked code point
    by code point against spaCy 3.8's classes)."""
    letters = np.uint32(LOWER | UPPER | SP_ALPHA)
    t[0x370:0x500] &= ~letters
    t[_ranges(_NOT_SPACY_LETTERS)] &= ~letters
    t[_ranges(_GREEK_CYR_LOWER)] |= np.uint32(LOWER | SP_ALPHA)
    t[_ranges(_GREEK_CYR_UPPER)] |= np.uint32(UPPER | SP_ALPHA)
    t[0x294] |= np.uint32(LOWER)


def _table_key() -> bytes:
    """What the built table depends on: this file, Python's Unicode data and the emoji package."""
    try:
        import emoji
        emoji_v = getattr(emoji, "__version__", "")
    except ImportError:  # pragma: no cover
        emoji_v = "-"
    with open(__file__, "rb") as f:
        return f.read() + f"{unicodedata.unidata_version}|{emoji_v}|{sys.version_info[:2]}".encode()


@lru_cache(maxsize=1)
def table() -> np.ndarray:
    """The flag table: ``table()[cp] & FLAG``. Building it takes ~1 s (Python predicates over all code
    points), so it is stored on disk and loaded by later processes (engine workers included)."""
    (t,) = cached_arrays("charclass", _table_key(), lambda: (_build_table(),))
    return t


def _build_table() -> np.ndarray:
    # Python's predicates are False on unassigned, private-use and surrogate code points (87% of the
    # range), so they are asked only about the assigned ones: a first run builds this 4x faster
    cats = np.array([unicodedata.category(chr(c)) for c in range(N_CP)])
    live = np.flatnonzero(~np.isin(cats, ["Cn", "Co", "Cs"]))
    chars = [chr(c) for c in live]
    t = np.zeros(N_CP, np.uint32)

    def mask(pred) -> np.ndarray:
        m = np.zeros(N_CP, bool)
        m[live] = np.fromiter(map(pred, chars), bool, len(chars))
        return m

    t[mask(str.isspace)] |= SPACE
    t[mask(str.isalpha)] |= ALPHA
    t[mask(str.isalnum)] |= ALNUM
    cased = np.zeros(N_CP, bool)
    for lo, hi in _CASED_BLOCKS:
        cased[lo:hi + 1] = True
    caseless = np.zeros(N_CP, bool)
    for lo, hi in _CASELESS_BLOCKS:
        caseless[lo:hi + 1] = True
    low = mask(str.islower) & cased
    up = mask(str.isupper) & cased
    t[low | caseless] |= LOWER
    t[up | caseless] |= UPPER
    t[low | up | caseless | (cased & (t & ALPHA).astype(bool))] |= SP_ALPHA
    _spacy_letter_fixes(t)
    t[np.char.startswith(cats, "P")] |= PCAT
    t[cats == "So"] |= ICON
    for c in range(ord("0"), ord("9") + 1):
        t[c] |= DIGIT
    for flag, cs in ((DT_PUNCT, DT_PUNCTUATION), (AFFIX, SP_PUNCT + SP_QUOTES + SP_CURRENCY),
                     (QUOTE, SP_QUOTES), (CURRENCY, SP_CURRENCY), (LINEBREAK, LINEBREAKS), (DJ_WS, DJ_WHITESPACES),
                     (DJ_SPECIAL, string.punctuation + string.digits + string.whitespace + DJ_OTHER_SPECIAL)):
        for ch in cs:
            t[ord(ch)] |= flag
    for cp in SENTENCE_TERMINALS:
        t[cp] |= TERM | DT_PUNCT
    for cp in _emoji_chars():
        t[cp] |= DJ_SPECIAL
    cjk = np.zeros(N_CP, bool)
    for lo, hi in ((0x2E80, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF), (0xFF00, 0xFFEF), (0x20000, 0x2FA1F),
                   (0x1100, 0x11FF)):
        cjk[lo:hi + 1] = True
    t[cjk] |= CJK
    return t


# -- UTF-8 <-> code points --------------------------------------------------------------------------

def buffers(arr: pa.Array):
    """(offsets int64, data uint8) of a string/large_string array, nulls read as empty strings."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count:
        arr = arr.fill_null("")
    if pa.types.is_large_string(arr.type):
        offs = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset:arr.offset + len(arr) + 1]
    else:
        offs = np.frombuffer(arr.buffers()[1], np.int32)[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    data = arr.buffers()[2]
    data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return offs, data


@njit(cache=True, nogil=True)
def _decode(offs, data):
    n = len(offs) - 1
    out = np.empty(offs[n] - offs[0], np.int32)
    cpo = np.empty(n + 1, np.int64)
    k = 0
    for d in range(n):
        cpo[d] = k
        i = offs[d]
        e = offs[d + 1]
        while i < e:
            b = data[i]
            if b < 0x80:
                out[k] = b
                i += 1
            elif b < 0xE0:
                out[k] = ((b & 0x1F) << 6) | (data[i + 1] & 0x3F)
                i += 2
            elif b < 0xF0:
                out[k] = ((b & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F)
                i += 3
            else:
                out[k] = ((b & 0x07) << 18) | ((data[i + 1] & 0x3F) << 12) | ((data[i + 2] & 0x3F) << 6) \
                    | (data[i + 3] & 0x3F)
                i += 4
            k += 1
    cpo[n] = k
    return out[:k], cpo


# Where a kernel has an uncompiled twin (numpy / Python codecs, same results), a process whose kernel would
# have to compile uses the twin for its first INTERPRET_BUDGET bytes or code points, then the kernel: a job on
# small data (the README's) compiles nothing on its first run, and a big one compiles after a few MB (the twins
# cost ~25 ms/MB more). A kernel already loaded is used from the first byte, and so is one in numba's cache
# (after `gristmill warm-up`) for a call of a megabyte or more (its load, ~20 ms, is worth it there): every
# forked worker would otherwise pay the twins' cost again on its first shard.
INTERPRET_BUDGET = 8 << 20
LOAD_AT = 1 << 20
_interpreted = 0
_ready: dict = {}


def _kernel_ready(kernel, n: int) -> bool:
    """Whether ``kernel`` runs ``n`` units without compiling: loaded in this process, or (for ``LOAD_AT``
    units or more) its cache index is current."""
    if kernel.signatures:
        return True
    if n < LOAD_AT:
        return False
    if kernel not in _ready:
        try:  # numba's own index reader: {} when the file is missing or its source stamp is stale
            _ready[kernel] = bool(kernel._cache._cache_file._load_index())
        except Exception:  # no cache (cache=False, an unwritable dir): take the budget rule
            _ready[kernel] = False
    return _ready[kernel]


def interpret(n: int, kernel=None) -> bool:
    """Whether to take the uncompiled twin for ``n`` more units: not when ``kernel`` is loaded (or cached, for
    ``LOAD_AT`` units or more), else until the budget is spent (then False for good)."""
    global _interpreted
    if kernel is not None and _kernel_ready(kernel, n):
        return False
    if _interpreted + n > INTERPRET_BUDGET:
        _interpreted = INTERPRET_BUDGET + 1
        return False
    _interpreted += n
    return True


def decode(arr: pa.Array):
    """Code points of a whole string column: (cps int32, per-row start offsets int64 of length n+1)."""
    offs, data = buffers(arr)
    if interpret(int(offs[-1] - offs[0]), _decode):
        return _decode_small(offs, data)
    return _decode(offs, data)


def _decode_small(offs, data):
    """``_decode`` through Python's UTF-8 codec: no compile, ~10x slower per byte (see ``interpret``)."""
    b = data[offs[0]:offs[-1]]
    text = b.tobytes().decode("utf-8", "surrogatepass")
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.int32).copy()
    starts = np.zeros(len(b) + 1, np.int64)
    np.cumsum((b & 0xC0) != 0x80, out=starts[1:])  # code points begin at every byte but continuations
    return cps, starts[offs - offs[0]]


@njit(cache=True, nogil=True)
def _encode(cps, spans_start, spans_end, row_off):
    """UTF-8 encode, for each output row r, the concatenation of code point spans row_off[r]..row_off[r+1]."""
    total = 0
    for s in range(len(spans_start)):
        for i in range(spans_start[s], spans_end[s]):
            c = cps[i]
            total += 1 if c < 0x80 else 2 if c < 0x800 else 3 if c < 0x10000 else 4
    data = np.empty(total, np.uint8)
    n = len(row_off) - 1
    offs = np.empty(n + 1, np.int64)
    k = 0
    for r in range(n):
        offs[r] = k
        for s in range(row_off[r], row_off[r + 1]):
            for i in range(spans_start[s], spans_end[s]):
                c = cps[i]
                if c < 0x80:
                    data[k] = c
                    k += 1
                elif c < 0x800:
                    data[k] = 0xC0 | (c >> 6)
                    data[k + 1] = 0x80 | (c & 0x3F)
                    k += 2
                elif c < 0x10000:
                    data[k] = 0xE0 | (c >> 12)
                    data[k + 1] = 0x80 | ((c >> 6) & 0x3F)
                    data[k + 2] = 0x80 | (c & 0x3F)
                    k += 3
                else:
                    data[k] = 0xF0 | (c >> 18)
                    data[k + 1] = 0x80 | ((c >> 12) & 0x3F)
                    data[k + 2] = 0x80 | ((c >> 6) & 0x3F)
                    data[k + 3] = 0x80 | (c & 0x3F)
                    k += 4
    offs[n] = k
    return data, offs


def encode_spans(cps, starts, ends, row_off, like: pa.Array) -> pa.Array:
    """A string column whose row r is the concatenation of the code-point spans of that row."""
    data, offs = _encode(cps, np.asarray(starts, np.int64), np.asarray(ends, np.int64), np.asarray(row_off, np.int64))
    typ = pa.large_string() if (pa.types.is_large_string(like.type) or offs[-1] >= 2**31) else pa.string()
    off_arr = offs if typ == pa.large_string() else offs.astype(np.int32)
    out = pa.Array.from_buffers(typ, len(offs) - 1, [None, pa.py_buffer(off_arr), pa.py_buffer(data)])
    if like.null_count:
        out = pc.if_else(pc.is_null(like), pa.scalar(None, typ), out)
    return out
