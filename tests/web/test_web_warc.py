"""WARC / WET / ARC readers on real Common Crawl files and on built fixtures (charsets, damage, limits)."""
import gzip
import shutil

import pytest

from gristmill.io.base import reader_for
from webutil import DATA, arc_file, http_response, read_all, warc_record, write_warc

CC = DATA / "cc-2020-34-sample.warc.gz"
CC_RESPONSES = [940, 12685, 32353, 38503, 42891, 48321, 61090, 70222, 75624, 87298, 99077, 106585, 110823,
                120465, 125552, 132240]


def test_reader_chosen_by_name():
    assert reader_for("a/CC-MAIN-x.warc.gz").name == "warc"
    assert reader_for("a/CC-MAIN-x.warc.wet.gz").name == "warc"
    assert reader_for("a/x.warc.lz4").name == "warc"
    assert reader_for("a/IA-001.arc.gz").name == "arc"
    assert reader_for("enwiki-20240601-pages-articles-multistream.xml.bz2").name == "wikipedia"


def test_common_crawl_warc_rows():
    rows, rejects, _ = read_all(CC)
    assert rejects == []
    # 17 URLs; the excerpt ends with the 17th URL's request record, so 16 responses
    assert [r["warc_offset"] for r in rows] == CC_RESPONSES
    assert [r["id"] for r in rows] == [f"cc-2020-34-sample.warc.gz:{o}" for o in CC_RESPONSES]
    first = rows[0]
    assert first["url"] == "http://003338.cn/l41/481397.html"
    assert first["date"] == "2020-08-08T17:27:41Z"
    assert first["record_id"] == "<urn:uuid:c4c112a5-3503-4483-abf8-51a0dd86dd53>"
    assert first["warc_type"] == "response" and first["http_status"] == 200
    assert first["warc_file"] == "cc-2020-34-sample.warc.gz"
    assert {r["content_type"] for r in rows} == {"text/html", "application/xhtml+xml"}
    by_url = {r["url"]: r for r in rows}
    ru = by_url["http://01spb.ru/company/"]  # windows-1251 declared by the server
    assert ru["charset"] == "cp1251" and "О компании" in ru["text"]
    cn = by_url["http://041696.com/15477/list_6_4.html"]  # no HTTP charset: found in the page / detected
    assert cn["charset"] == "gbk" and "\ufffd" not in cn["text"]
    ch = by_url["http://06.live-radsport.ch/fahrerstatistik_801/Anthony_Ravard.html"]
    assert ch["charset"] == "cp1252"
    assert all("\ufffd" not in r["text"] for r in rows)


def test_wet_conversion_records():
    rows, rejects, _ = read_all(DATA / "whirlwind.warc.wet.gz")
    assert rejects == [] and len(rows) == 1
    r = rows[0]
    assert r["warc_type"] == "conversion" and r["content_type"] == "text/plain"
    assert r["url"] == "https://an.wikipedia.org/wiki/Escopete"
    assert r["text"].startswith("Escopete - Biquipedia, a enciclopedia libre\n")
    assert r["id"] == "whirlwind.warc.wet.gz:466"


def test_truncated_common_crawl_file_keeps_records_before_the_cut():
    rows, rejects, _ = read_all(DATA / "cc-2020-34-truncated.warc.gz")
    assert [r["warc_offset"] for r in rows] == CC_RESPONSES[:5]
    full, _, _ = read_all(CC)
    assert [r["text"] for r in rows] == [r["text"] for r in full[:5]]
    assert [(j.error_type, j.offset) for j in rejects] == [("TruncatedRecord", 48321)]
    assert "36448 of 37751" in rejects[0].message


def test_cut_inside_a_record_header(tmp_path):
    data = CC.read_bytes()
    p = tmp_path / "cut.warc.gz"
    p.write_bytes(data[:61100])  # 10 bytes into the gzip member of the response at 61090
    rows, rejects, _ = read_all(p)
    assert [r["warc_offset"] for r in rows] == CC_RESPONSES[:6]
    assert [(j.error_type, j.offset) for j in rejects] == [("TruncatedArchive", 61090)]


def test_corrupt_member_in_the_middle_is_skipped(tmp_path):
    data = bytearray(CC.read_bytes())
    data[61090 + 30: 61090 + 400] = b"x" * 370  # damage the deflate stream of one response
    p = tmp_path / "bad.warc.gz"
    p.write_bytes(bytes(data))
    rows, rejects, _ = read_all(p)
    assert [r["warc_offset"] for r in rows] == [o for o in CC_RESPONSES if o != 61090]
    assert [(j.error_type, j.offset) for j in rejects] == [("CorruptArchive", 61090)]


@pytest.mark.parametrize("comp", [None, "lz4", "zst"])
def test_other_compressions_give_the_same_rows(tmp_path, comp):
    raw = gzip.decompress(CC.read_bytes())
    ext = {None: "", "lz4": ".lz4", "zst": ".zst"}[comp]
    p = tmp_path / f"cc.warc{ext}"
    if comp is None:
        p.write_bytes(raw)
    elif comp == "lz4":
        import lz4.frame
        p.write_bytes(lz4.frame.compress(raw))
    else:
        import zstandard
        p.write_bytes(zstandard.ZstdCompressor().compress(raw))
    rows, rejects, _ = read_all(p)
    full, _, _ = read_all(CC)
    assert rejects == []
    assert [r["text"] for r in rows] == [r["text"] for r in full]
    assert len({r["id"] for r in rows}) == len(rows)


def test_plain_warc_cut_inside_a_payload(tmp_path):
    raw = gzip.decompress(CC.read_bytes())
    p = tmp_path / "cut.warc"
    p.write_bytes(raw[:200000])
    rows, rejects, _ = read_all(p)
    assert len(rows) == 5
    assert [j.error_type for j in rejects] == ["TruncatedRecord"]


def _page(title, body):
    return f"<html><head><title>{title}</title></head><body><p>{body}</p></body></html>"


def test_types_sizes_encodings_and_batches(tmp_path):
    recs = [
        warc_record("warcinfo", None, b"software: test\r\n", "application/warc-fields", n=0),
        warc_record("request", "http://a.example/", b"GET / HTTP/1.1\r\n\r\n", n=1),
        warc_record("response", "http://a.example/", http_response(_page("A", "Привет, мир").encode("cp1251"),
                                                                    "text/html; charset=windows-1251"), n=2),
        warc_record("response", "http://b.example/logo.png", http_response(b"\x89PNG\r\n\x1a\n" + b"\0" * 50,
                                                                            "image/png"), n=3),
        warc_record("response", "http://c.example/", http_response(
            ('<html><head><meta charset="shift_jis"><title>C</title></head><body>' + "日本語のテキスト" * 20
             + "</body></html>").encode("shift_jis"), "text/html"), n=4),
        warc_record("response", "http://d.example/", http_response(_page("D", "Ünïcödé café " * 5).encode("cp1252"),
                                                                    "text/html; charset=utf-8"), n=5),
        warc_record("response", "http://e.example/big", http_response(_page("E", "x" * 5000).encode()), n=6),
        warc_record("response", "http://f.example/", http_response(
            b"1a\r\n" + _page("F", "chunked!").encode()[:26] + b"\r\n" + f"{len(_page('F', 'chunked!')) - 26:x}".encode()
            + b"\r\n" + _page("F", "chunked!").encode()[26:] + b"\r\n0\r\n\r\n",
            "text/html", extra={"Transfer-Encoding": "chunked"}), n=7),
        warc_record("response", "http://g.example/", http_response(gzip.compress(_page("G", "zipped").encode(), mtime=0),
                                                                    "text/html", extra={"Content-Encoding": "gzip"}), n=8),
        warc_record("metadata", "http://g.example/", b"fetchTimeMs: 1\r\n", "application/warc-fields", n=9),
    ]
    p = write_warc(tmp_path / "mix.warc.gz", recs)
    rows, rejects, sizes = read_all(p, batch_size=2, max_record_bytes=4000)
    assert [r["url"] for r in rows] == ["http://a.example/", "http://c.example/", "http://d.example/",
                                       "http://f.example/", "http://g.example/"]
    assert sizes == [2, 2, 1]
    assert "Привет, мир" in rows[0]["text"] and rows[0]["charset"] == "cp1251"
    assert "日本語のテキスト" in rows[1]["text"] and rows[1]["charset"] == "shift_jis"
    # declared utf-8 but really cp1252: the declaration is not trusted when the bytes are invalid in it
    assert "Ünïcödé café" in rows[2]["text"] and rows[2]["charset"] == "cp1252"
    assert "chunked!" in rows[3]["text"] and rows[3]["text"].endswith("</html>")
    assert "zipped" in rows[4]["text"]
    assert [(j.error_type, j.row["url"]) for j in rejects] == [
        ("SkippedContentType", "http://b.example/logo.png"), ("RecordTooLarge", "http://e.example/big")]
    assert all(j.source == p and j.offset is not None for j in rejects)
    # every type accepted, and a larger limit: nothing rejected
    rows2, rejects2, _ = read_all(p, mime_types="*")
    assert rejects2 == [] and len(rows2) == 7


def test_resource_records_and_type_selection(tmp_path):
    recs = [warc_record("resource", "file:///doc.html", _page("R", "a resource record").encode(), "text/html", n=0),
            warc_record("response", "http://x.example/", http_response(_page("X", "resp").encode()), n=1)]
    p = write_warc(tmp_path / "r.warc", recs, compression=None)
    rows, rejects, _ = read_all(p)
    assert [r["warc_type"] for r in rows] == ["resource", "response"] and rejects == []
    assert rows[0]["http_status"] is None and "a resource record" in rows[0]["text"]
    rows, _, _ = read_all(p, warc_types="resource")
    assert [r["warc_type"] for r in rows] == ["resource"]


@pytest.mark.parametrize("compress", [False, True])
def test_arc_files(tmp_path, compress):
    html = _page("Café", "Olá mundo, ça va? Grüße").encode("latin-1")
    recs = [("http://example.com/a", "text/html", http_response(html, "text/html; charset=iso-8859-1")),
            ("http://example.com/b.png", "image/png", http_response(b"\x89PNG....", "image/png")),
            ("http://example.com/c", "text/html", http_response(_page("C", "third").encode()))]
    p = tmp_path / ("t.arc.gz" if compress else "t.arc")
    p.write_bytes(arc_file(recs, compress))
    rows, rejects, _ = read_all(p)
    assert [r["url"] for r in rows] == ["http://example.com/a", "http://example.com/c"]
    assert "Olá mundo, ça va? Grüße" in rows[0]["text"]
    assert rows[0]["date"] == "2024-01-01T12:00:00Z" and rows[0]["record_id"] is None
    assert rows[0]["id"] == f"{p.name}:{rows[0]['warc_offset']}"
    assert [j.error_type for j in rejects] == ["SkippedContentType"]


def test_arc_truncated_inside_last_record(tmp_path):
    recs = [("http://example.com/a", "text/html", http_response(_page("A", "first").encode())),
            ("http://example.com/b", "text/html", http_response(_page("B", "second " * 50).encode()))]
    data = arc_file(recs)
    p = tmp_path / "cut.arc"
    p.write_bytes(data[:-100])
    rows, rejects, _ = read_all(p)
    assert [r["url"] for r in rows] == ["http://example.com/a"]
    assert [j.error_type for j in rejects] == ["TruncatedRecord"]


def test_engine_reads_warc_through_dataset(tmp_path):
    from gristmill.dataset import Dataset
    shutil.copy(DATA / "cc-2020-34-truncated.warc.gz", tmp_path / "t.warc.gz")
    ds = Dataset.load(str(tmp_path / "t.warc.gz"))
    rows = ds.to_list()
    assert [r["warc_offset"] for r in rows] == CC_RESPONSES[:5]
    rep = ds.last_report
    assert rep["rows_rejected_on_read"] == 1
