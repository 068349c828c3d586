"""extract_tables_from_html_mapper against Data-Juicer 1.6.1: DJ_TABLES were produced by DJ's op on HTML
(``/tmp/peers/dj``) and frozen here: malformed and nested tables, header rows, unicode, no table, empty."""
import pytest

from djops_util import run

HTML = [
 "<html><body><h1>Prix</h1><table><tr><th>Produit</th><th>Prix (€)</th></tr><tr><td> Café </td><td>2,50</td></tr><tr><td>Thé <b>vert</b></td><td>3</td></tr></table>\n<p>texte</p><table><tr></tr></table><table><thead><tr><th>a</th></tr></thead><tbody><tr><td>1</td><td><table><tr><td>nested</td></tr></table></td></tr></tbody></table></body></html>",
 "<p>no tables here</p>",
 "",
 "<table><tr><td>unclosed<td>cells<tr><td>next row"
]

# params (JSON) -> meta.html_tables of each row, from Data-Juicer 1.6.1
DJ_TABLES = {
    '{}': [[[["Produit", "Prix (€)"], ["Café", "2,50"], ["Thévert", "3"]], [["a"], ["1", "nested"], ["nested"]], [["nested"]]], [], [], [[["unclosedcellsnext row"], ["next row"]]]],
    '{"retain_html_tags": true}': [["<table><tr><th>Produit</th><th>Prix (€)</th></tr><tr><td> Café </td><td>2,50</td></tr><tr><td>Thé <b>vert</b></td><td>3</td></tr></table>", "<table><tr></tr></table>", "<table><thead><tr><th>a</th></tr></thead><tbody><tr><td>1</td><td><table><tr><td>nested</td></tr></table></td></tr></tbody></table>", "<table><tr><td>nested</td></tr></table>"], [], [], ["<table><tr><td>unclosed<td>cells<tr><td>next row</td></tr></td></td></tr></table>"]],
    '{"include_header": false}': [[[["Café", "2,50"], ["Thévert", "3"]], [["1", "nested"], ["nested"]], [["nested"]]], [], [], [[["unclosedcellsnext row"], ["next row"]]]],
}


@pytest.mark.parametrize("params", list(DJ_TABLES))
def test_same_tables_as_data_juicer(params):
    import json
    kept, removed = run("extract_tables_from_html_mapper", [{"text": t} for t in HTML], **json.loads(params))
    assert not removed and [r["__meta__"]["html_tables"] for r in kept] == DJ_TABLES[params]
    assert [r["text"] for r in kept] == HTML


def test_existing_value_kept_and_custom_field():
    rows = [{"text": HTML[0], "__meta__": {"html_tables": [[["already"]]]}}, {"text": HTML[3], "__meta__": {"html_tables": None}}]
    kept, _ = run("extract_tables_from_html_mapper", rows)
    assert kept[0]["__meta__"]["html_tables"] == [[["already"]]]
    assert kept[1]["__meta__"]["html_tables"] == [[["unclosedcellsnext row"], ["next row"]]]
    kept, _ = run("extract_tables_from_html_mapper", [{"text": HTML[0]}], tables_field_name="t", include_header=False)
    assert kept[0]["__meta__"]["t"][0] == [["Café", "2,50"], ["Thévert", "3"]]
