"""Wikipedia XML dump reader: wikitext → plain text, namespaces, redirects, multistream and truncated dumps."""
import bz2
from xml.sax.saxutils import escape

from gristmill.io.wikipedia import wikitext_to_text
from webutil import read_all

HEAD = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" xml:lang="de">
  <siteinfo>
    <sitename>Wikipedia</sitename>
    <dbname>dewiki</dbname>
    <base>https://de.wikipedia.org/wiki/Wikipedia:Hauptseite</base>
    <namespaces>
      <namespace key="-2" case="first-letter">Medium</namespace>
      <namespace key="0" case="first-letter" />
      <namespace key="1" case="first-letter">Diskussion</namespace>
      <namespace key="6" case="first-letter">Datei</namespace>
      <namespace key="14" case="first-letter">Kategorie</namespace>
    </namespaces>
  </siteinfo>
"""

MILL = """{{Infobox Bauwerk|Name=Alte Mühle|Baujahr=1820}}
Die '''Alte Mühle''' ist eine [[Wassermühle]] am [[Fluss (Gewässer)|Fluss]] Beispiel.<ref name="a">{{Literatur|Titel=Mühlen}}</ref> Sie wurde 1820 gebaut.
[[Datei:Muehle.jpg|mini|Die Mühle im Jahr 1900]]
== Geschichte ==
Im 19. Jahrhundert mahlte die Mühle Getreide für das ganze Tal.<ref>Chronik, S. 3</ref>
{| class="wikitable"
! Jahr !! Besitzer
|-
| 1820 || Meier
|}
* Umbau 1901
* Stilllegung ''1960''
<!-- versteckter Kommentar -->
== Einzelnachweise ==
<references />
== Weblinks ==
[[Kategorie:Mühle]]
[[en:Old Mill]]
"""


def page(pid, title, text, ns=0, redirect=None):
    red = f'<redirect title="{escape(redirect)}" />' if redirect else ""
    return (f"  <page>\n    <title>{escape(title)}</title>\n    <ns>{ns}</ns>\n    <id>{pid}</id>\n    {red}\n"
            f"    <revision>\n      <id>{pid * 10}</id>\n      <timestamp>2024-06-01T00:00:00Z</timestamp>\n"
            f"      <text bytes=\"{len(text)}\" xml:space=\"preserve\">{escape(text)}</text>\n    </revision>\n  </page>\n")


PAGES = [page(5, "Alte Mühle", MILL), page(6, "Muehle", "#WEITERLEITUNG [[Alte Mühle]]", redirect="Alte Mühle"),
         page(7, "Diskussion:Alte Mühle", "Ein Kommentar.", ns=1),
         page(9, "Beispiel (Fluss)", "Der '''Beispiel''' ist ein Fluss in [[Hessen]].\n\n== Verlauf ==\nEr fließt nach Norden.")]


def _dump(path, pages, streams=1):
    xml = HEAD + "".join(pages) + "</mediawiki>\n"
    if streams == 1:
        path.write_bytes(bz2.compress(xml.encode()))
    else:  # multistream: the header, then the pages, then the footer, each its own bz2 stream
        parts = [HEAD, "".join(pages), "</mediawiki>\n"]
        path.write_bytes(b"".join(bz2.compress(p.encode()) for p in parts))
    return path


def test_wikitext_to_text():
    text = wikitext_to_text(MILL, frozenset({"datei", "kategorie", "file", "category", "image", "media"}))
    assert text == ("Die Alte Mühle ist eine Wassermühle am Fluss Beispiel. Sie wurde 1820 gebaut.\n\n"
                    "Geschichte\n"
                    "Im 19. Jahrhundert mahlte die Mühle Getreide für das ganze Tal.\n\n"
                    "Umbau 1901\nStilllegung 1960")


def test_dump_rows(tmp_path):
    p = _dump(tmp_path / "dewiki-20240601-pages-articles.xml.bz2", PAGES)
    rows, rejects, _ = read_all(p)
    assert rejects == []
    assert [r["title"] for r in rows] == ["Alte Mühle", "Beispiel (Fluss)"]  # no redirect, no talk page
    mill, river = rows
    assert mill["id"] == "dewiki-20240601-pages-articles.xml.bz2:5"
    assert (mill["page_id"], mill["revision_id"], mill["namespace"]) == (5, 50, 0)
    assert mill["timestamp"] == "2024-06-01T00:00:00Z"
    assert mill["url"] == "https://de.wikipedia.org/wiki/Alte_M%C3%BChle"
    assert river["url"] == "https://de.wikipedia.org/wiki/Beispiel_(Fluss)"
    assert "Datei" not in mill["text"] and "Mühle im Jahr 1900" not in mill["text"]  # localised File: link
    assert "Kategorie" not in mill["text"] and "Old Mill" not in mill["text"]
    assert "Einzelnachweise" not in mill["text"] and "Weblinks" not in mill["text"]  # empty sections
    assert river["text"] == "Der Beispiel ist ein Fluss in Hessen.\n\nVerlauf\nEr fließt nach Norden."
    rows, _, _ = read_all(p, wiki_namespaces="0,1")
    assert [r["title"] for r in rows] == ["Alte Mühle", "Diskussion:Alte Mühle", "Beispiel (Fluss)"]


def test_multistream_dump_and_batches(tmp_path):
    many = [page(100 + i, f"Seite {i}", f"Text der Seite {i}.") for i in range(7)]
    p = _dump(tmp_path / "x-pages-articles-multistream.xml.bz2", many, streams=3)
    rows, rejects, sizes = read_all(p, batch_size=3)
    assert rejects == [] and sizes == [3, 3, 1]
    assert [r["text"] for r in rows] == [f"Text der Seite {i}." for i in range(7)]


def test_truncated_dump_keeps_pages_before_the_cut(tmp_path):
    words = ["Mühle", "Fluss", "Tal", "Getreide", "Rad", "Wasser", "Dorf", "Brücke", "Müller", "Jahr"]
    x, many = 1, []
    for i in range(30):
        ws = []
        for _ in range(3000):
            x = (x * 1103515245 + 12345) % (1 << 31)
            ws.append(words[x % 10] + str(x % 97))
        many.append(page(100 + i, f"Seite {i}", " ".join(ws)))
    full = tmp_path / "full-pages-articles.xml.bz2"  # 100 kB bz2 blocks, so a cut keeps whole blocks
    full.write_bytes(bz2.compress((HEAD + "".join(many) + "</mediawiki>\n").encode(), compresslevel=1))
    data = full.read_bytes()
    cut = tmp_path / "cut-pages-articles.xml.bz2"
    cut.write_bytes(data[: len(data) * 2 // 3])
    rows, rejects, _ = read_all(cut)
    all_rows, _, _ = read_all(full)
    assert 0 < len(rows) < 30
    assert rows == [dict(r, id=r["id"].replace("full-", "cut-")) for r in all_rows[: len(rows)]]
    assert len(rejects) == 1 and rejects[0].error_type == "TruncatedInput"
    assert f"after page {rows[-1]['page_id']}" in rejects[0].message


def test_not_a_wiki_dump(tmp_path):
    p = tmp_path / "other.mediawiki.xml"
    p.write_text("<feed><entry>x</entry></feed>")
    rows, rejects, _ = read_all(p)
    assert rows == [] and [j.error_type for j in rejects] == ["NotAWikiDump"]
