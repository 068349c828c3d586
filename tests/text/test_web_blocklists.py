"""c4_badwords_filter and url_filter (datatrove semantics) on small hand-checked inputs."""
import pyarrow as pa
import pytest

from gristmill.core.fused import FusedOp
from gristmill.ops.text.url_filter import public_suffixes, split_host
from gristmill.registry import create_op


def apply(name, rows, **params):
    batch = pa.RecordBatch.from_pylist(rows)
    res = FusedOp([create_op(name, params)]).run_batch(batch)
    removed = res.removed[0].to_pylist() if res.removed[0] is not None else []
    return res.batch.to_pylist(), removed, res


# -- c4_badwords_filter ------------------------------------------------------------------------------

def test_badwords_word_boundaries_english():
    rows = [{"id": "a", "text": "A perfectly clean sentence."},
            {"id": "b", "text": "What an ASS."},           # upper case, flanked by space and '.'
            {"id": "c", "text": "ass"},                    # whole text
            {"id": "d", "text": "The class passed."},      # 'ass' only inside words
            {"id": "e", "text": "x 2 girls 1 cup y"},      # multi-word entry
            {"id": "f", "text": "bass_ass"}]               # '_' is a word character
    kept, removed, _ = apply("c4_badwords_filter", rows)
    assert [r["id"] for r in kept] == ["a", "d", "f"]
    assert [r["id"] for r in removed] == ["b", "c", "e"]
    assert {r["__reason__"] for r in removed} == {"document_removed_with_badwords"}
    assert [r["__stats__"]["c4_badwords"] for r in kept + removed] == [0, 0, 0, 1, 1, 1]


def test_badwords_language_from_stats_and_no_space_languages():
    rows = [{"id": "1", "text": "这是乳房的图片", "language": "zh"},   # zh: no word boundary needed
            {"id": "2", "text": "性别平等", "language": "zh"},         # '性' is on C4's allowlist
            {"id": "3", "text": "ass", "language": "zh"},              # not in the zh list
            {"id": "4", "text": "ass", "language": None}]              # default_language en
    kept, removed, _ = apply("c4_badwords_filter", rows)
    assert [r["id"] for r in kept] == ["2", "3"]
    assert [r["id"] for r in removed] == ["1", "4"]


def test_badwords_missing_language():
    rows = [{"id": "1", "text": "ass", "language": "xx"}]
    with pytest.raises(ValueError, match="no badwords list"):
        create_op("c4_badwords_filter", {}).compute_stats(pa.RecordBatch.from_pylist(rows))
    kept, removed, _ = apply("c4_badwords_filter", rows, fail_on_missing_language=False)
    assert len(kept) == 1 and kept[0]["__stats__"]["c4_badwords"] == -1


def test_badwords_keep_fraction_is_deterministic_per_id():
    rows = [{"id": f"doc{i}", "text": "ass"} for i in range(400)]
    kept1, removed1, _ = apply("c4_badwords_filter", rows, keep_fraction=0.25, seed=7)
    kept2, _, _ = apply("c4_badwords_filter", rows[::-1], keep_fraction=0.25, seed=7)
    assert sorted(r["id"] for r in kept1) == sorted(r["id"] for r in kept2)
    assert 60 < len(kept1) < 140 and len(kept1) + len(removed1) == 400
    kept_all, _, _ = apply("c4_badwords_filter", rows, keep_fraction=1.0)
    assert len(kept_all) == 400


def test_badwords_user_dir(tmp_path):
    (tmp_path / "en").write_text("foo\nbar baz\n")
    rows = [{"text": "a foo!"}, {"text": "food"}, {"text": "BAR BAZ"}, {"text": "ass"}]
    kept, removed, _ = apply("c4_badwords_filter", rows, badwords_dir=str(tmp_path))
    assert [r["text"] for r in kept] == ["food", "ass"]
    assert [r["text"] for r in removed] == ["a foo!", "BAR BAZ"]


# -- url_filter ---------------------------------------------------------------------------------------

def test_split_host_public_suffix_rules():
    psl = public_suffixes()
    assert split_host("www.example.co.uk", psl) == ("example.co.uk", "www.example.co.uk")
    assert split_host("example.com", psl) == ("example.com", "example.com")
    assert split_host("co.uk", psl) == ("", "")
    assert split_host("localhost", psl) == ("", "")
    assert split_host("a.b.kawasaki.jp", psl) == ("a.b.kawasaki.jp", "a.b.kawasaki.jp")  # *.kawasaki.jp
    assert split_host("city.kawasaki.jp", psl) == ("city.kawasaki.jp", "city.kawasaki.jp")  # !city.kawasaki.jp


def test_url_filter_rules_and_reasons(tmp_path):
    (tmp_path / "adult").mkdir()
    (tmp_path / "adult" / "domains").write_text("# comment\nbad.com\nsub.fine.org\n")
    (tmp_path / "adult" / "urls").write_text("http://fine.org/exact\n")
    urls = ["https://www.bad.com/page",          # registered domain bad.com -> domain
            "http://sub.fine.org/x",              # fqdn -> subdomain
            "http://fine.org/exact",              # exact url
            "http://fine.org/exactly",            # kept
            "http://shop.example.com/Casino-night",  # 'Casino' capitalised: datatrove keeps case -> kept
            "http://shop.example.com/casino",      # hard banned word
            "http://a.com/poker-and-bet",          # 2 soft words -> soft
            "http://a.com/poker",                  # 1 soft word -> kept
            "http://a.com/x/pornhub-clips",        # sub-word 'porn' after normalisation
            "http://user:pw@BAD.com:8080/",        # host from userinfo/port, lower-cased -> domain
            "bad.com:8080/no-scheme"]             # no scheme: host is before the port -> domain
    rows = [{"id": str(i), "url": u} for i, u in enumerate(urls)]
    kept, removed, res = apply("url_filter", rows, blocklist_dir=str(tmp_path), banned_words=["casino"],
                               soft_banned_words=["poker", "bet", "dice"], banned_subwords=["porn"],
                               use_integrated_lists=False)
    assert [r["id"] for r in kept] == ["3", "4", "7"]
    assert {r["id"]: r["__reason__"] for r in removed} == {
        "0": "domain", "1": "subdomain", "2": "url", "5": "hard_blacklisted", "6": "soft_blacklisted",
        "8": "blacklisted_subword", "9": "domain", "10": "domain"}
    assert res.counts[0].reasons == {"blacklisted_subword": 1, "domain": 3, "hard_blacklisted": 1,
                                     "soft_blacklisted": 1, "subdomain": 1, "url": 1}
    stats = {r["id"]: r["__stats__"] for r in kept + removed}
    assert stats["6"] == {"url_filter": 0, "url_soft_words": 2}
    assert stats["7"] == {"url_filter": 0, "url_soft_words": 1}
    assert stats["0"]["url_filter"] == 1 and stats["8"]["url_filter"] == 32


def test_url_filter_threshold_retune_and_lowercase_option():
    rows = [{"url": "http://a.com/poker"}, {"url": "http://a.com/Casino"}]
    kept, removed, _ = apply("url_filter", rows, soft_banned_words=["poker"], soft_word_threshold=1,
                             banned_words=["casino"], use_integrated_lists=False, lowercase_url_words=True)
    assert kept == [] and [r["__reason__"] for r in removed] == ["soft_blacklisted", "hard_blacklisted"]


def test_url_filter_integrated_words_and_missing_url():
    kept, removed, _ = apply("url_filter", [{"url": "http://x.org/free-porn"}, {"url": "http://x.org/news"}])
    assert [r["url"] for r in kept] == ["http://x.org/news"]
    assert removed[0]["__reason__"] == "hard_blacklisted"
    _, _, res = apply("url_filter", [{"url": "http://x.org/"}, {"url": None}])
    assert res.counts[0].rejected == 1 and res.batch.num_rows == 1
