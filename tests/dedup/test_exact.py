import pytest
from deduputil import run_dedup

from gristmill.ops.dedup.exact import DocumentDeduplicator, FieldDeduplicator

TEXTS = ["Hello world.", "hello   World", "Hello world.", "  Hello world.\n", "Héllo world", "Other text 1",
         "Other text 2", None, None]


def rows():
    return [{"id": f"r{i}", "text": t} for i, t in enumerate(TEXTS)]


def test_default_is_exact_after_strip(tmp_path):
    res = run_dedup(DocumentDeduplicator(), rows(), tmp_path)
    # r2 and r3 equal r0 after stripping; the two nulls are empty texts and equal each other
    assert res.removed_ids == ["r2", "r3", "r8"]
    assert {r["id"]: r["kept_id"] for r in res.removed} == {"r2": "r0", "r3": "r0", "r8": "r7"}
    assert all(r["reason"] == "exact duplicate" for r in res.removed)


def test_lowercase_and_non_character(tmp_path):
    res = run_dedup(DocumentDeduplicator(lowercase=True, ignore_non_character=True), rows(), tmp_path)
    # "helloworld" for r0..r3; "other text 1"/"2" differ only in a digit → same key
    assert res.removed_ids == ["r1", "r2", "r3", "r6", "r8"]


def test_unicode_and_whitespace_normalisation(tmp_path):
    data = [{"id": "a", "text": "ﬁne  day"}, {"id": "b", "text": "fine day"}, {"id": "c", "text": "fine\tday"}]
    assert run_dedup(DocumentDeduplicator(), data, tmp_path / "1").removed_ids == []
    res = run_dedup(DocumentDeduplicator(unicode_normalization="NFKC", normalize_whitespace=True), data,
                    tmp_path / "2")
    assert res.removed_ids == ["b", "c"]
    cl = res.clusters()
    assert sorted((c["id"], c["kept"]) for c in cl) == [("a", True), ("b", False), ("c", False)]


URL_ROWS = [
    {"id": "1", "url": "https://example.com/a", "text": "short", "date": "2019-01-01T00:00:00Z"},
    {"id": "2", "url": "http://www.example.com/a/", "text": "much longer text", "date": "2021-05-01T00:00:00Z"},
    {"id": "3", "url": "https://example.com/a", "text": "mid text", "date": "2020-01-01T00:00:00Z"},
    {"id": "4", "url": "https://example.com/b", "text": "b", "date": None},
    {"id": "5", "url": None, "text": "no url", "date": None},
    {"id": "6", "url": "", "text": "empty url", "date": None},
]


@pytest.mark.parametrize("keep,norm,expect_kept", [
    ("first", False, {"1", "2", "4", "5", "6"}),
    ("last", False, {"2", "3", "4", "5", "6"}),
    ("longest", True, {"2", "4", "5", "6"}),
    ("shortest", True, {"1", "4", "5", "6"}),
    ("newest", True, {"2", "4", "5", "6"}),
    ("oldest", True, {"1", "4", "5", "6"}),
])
def test_field_keep_priority(tmp_path, keep, norm, expect_kept):
    res = run_dedup(FieldDeduplicator(field="url", keep=keep, normalize_url=norm), URL_ROWS, tmp_path)
    assert set(res.kept_ids) == expect_kept
    group = {"1", "2", "3"} if norm else {"1", "3"}
    (kept_of_a,) = expect_kept & group
    for r in res.removed:
        assert r["kept_id"] == kept_of_a and r["reason"] == "duplicate key"


def test_field_missing_is_an_error():
    import pyarrow as pa
    with pytest.raises(KeyError, match="nope"):
        FieldDeduplicator(field="nope").compute_hash(pa.RecordBatch.from_pylist(URL_ROWS))
