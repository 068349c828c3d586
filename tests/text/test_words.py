import pyarrow as pa

from gristmill.ops.text import charclass as cc
from gristmill.ops.text.words import dj_words, spacy_words_py


def test_spacy_rules_affixes_and_special_cases():
    # checked against spaCy 3.8 blank("en") tokenizer, which datatrove uses for English
    assert spacy_words_py("Hello, world. Don't stop! I'm here; you'll see.") == [
        "Hello", ",", "world", ".", "Do", "n't", "stop", "!", "I", "'m", "here", ";", "you", "'ll", "see", "."]
    assert spacy_words_py("e.g. U.S. USA. Inc. Mr. Smith A. B.") == [
        "e.g.", "U.S.", "USA", ".", "Inc.", "Mr.", "Smith", "A.", "B."]
    assert spacy_words_py("well-known 3-4 a/b 1,000 a,b end.Next (x)") == [
        "well", "-", "known", "3", "-", "4", "a", "/", "b", "1,000", "a", ",", "b", "end", ".", "Next", "(", "x", ")"]
    assert spacy_words_py("http://www.example.com/foo. 10km $100 ...wait… ##") == [
        "http://www.example.com/foo", ".", "10", "km", "$", "100", "...", "wait", "…", "#", "#"]
    assert spacy_words_py("can't John's it's :) Smith,d. pandas.Series pandas.Series.str") == [
        "ca", "n't", "John", "'s", "it", "'s", ":)", "Smith", ",", "d.", "pandas", ".", "Series", "pandas.Series.str"]
    assert spacy_words_py("你好，世界。这是 测试！") == ["你好，世界。这是", "测试", "！"]
    assert spacy_words_py("a\tb\n c  ") == ["a", "b", "c"]


def test_spacy_rules_fixed_against_real_text():
    # each case is a class of difference found on real documents by bench/filter_fidelity.py --tokens;
    # expected lists are spaCy 3.8's output
    # URL: the TLD must be spaCy's lower-case letters; scheme and user@ must be well-formed
    assert spacy_words_py("pandas.DatetimeTZDtype.tz¶ pandas.DatetimeTZDtype.unit") == [
        "pandas", ".", "DatetimeTZDtype.tz¶", "pandas.DatetimeTZDtype.unit"]
    assert spacy_words_py("fetch('https://httpbin.org/post @张三.李四") == [
        "fetch('https://httpbin.org", "/", "post", "@张三", ".", "李四"]
    # special cases: clock times, ‘S, modal 've, °C.
    assert spacy_words_py("at 10am ‘S’ could've 5°C.") == [
        "at", "10", "am", "‘S", "’", "could", "'ve", "5", "°", "C", "."]
    # multi-letter currency prefixes; "." after a currency sign is not a suffix
    assert spacy_words_py("C$1 US$/season 500$.") == ["C$", "1", "US$", "/season", "500$."]
    # letters spaCy does not list (Belarusian ў) trigger neither the "." suffix nor the "/" infix
    assert spacy_words_py("абмежаванняў. oʻzbekcha/ўзбекча") == ["абмежаванняў.", "oʻzbekcha/ўзбекча"]
    # the special-case matcher: "d." re-joined after "id" splits; overlapping quote pairs taken once
    assert spacy_words_py("the id. If") == ["the", "i", "d.", "If"]
    # ... across a single space too: ":o)" there blocks the later "):" from being joined
    assert spacy_words_py("x : o): y") == ["x", ":", "o", ")", ":", "y"]
    assert spacy_words_py("1980''''' x……. ''bold'''") == [
        "1980", "''", "'", "'", "'", "x", "……", ".", "''", "bold", "''", "'"]


def test_decode_encode_roundtrip_with_nulls_and_astral():
    arr = pa.array(["héllo", None, "", "中文😀"])
    cps, cpo = cc.decode(arr)
    assert cpo.tolist() == [0, 5, 5, 5, 8]
    out = cc.encode_spans(cps, cpo[:-1], cpo[1:], range(5), arr)
    assert out.to_pylist() == ["héllo", None, "", "中文😀"]


def test_dj_words_split_and_strip():
    cps, cpo = cc.decode(pa.array(["Hello, world!\tfoo--bar 123 ...\nyes😀", ""]))
    s, e, off = dj_words(cps, cpo)
    text = "Hello, world!\tfoo--bar 123 ...\nyes😀"
    assert [text[a:b] for a, b in zip(s, e)] == ["Hello", "world", "foo--bar", "yes"]
    assert off.tolist() == [0, 4, 4]


def test_charclass_table_disk_cache_matches_a_fresh_build(tmp_path, monkeypatch):
    monkeypatch.setenv("GRISTMILL_CACHE", str(tmp_path))
    cc.table.cache_clear()
    try:
        built = cc.table()  # builds and stores
        assert list(tmp_path.glob("charclass/*.npz"))
        cc.table.cache_clear()
        loaded = cc.table()  # loads
        assert loaded.dtype == built.dtype and (loaded == built).all()
        assert loaded[ord(" ")] & cc.SPACE and loaded[ord("ж")] & cc.LOWER and not loaded[ord("ў")] & cc.LOWER
    finally:
        cc.table.cache_clear()
