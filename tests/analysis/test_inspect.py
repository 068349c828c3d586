"""`gristmill inspect`: the --where language on real files, streaming with -n, --json, Parquet, removed-samples
files, errors and interactive paging — all through the real CLI."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gristmill.cli import main


def _rows():
    rows = []
    for i in range(40):
        r = {"id": f"doc-{i}", "text": f"sample {i} " + "word " * i, "src": "web" if i % 2 else "books",
             "tags": ["a", "b"] if i % 4 == 0 else ["c"],
             "__stats__": {"num_words": i + 2, "ratio": i / 10}, "__meta__": {"lang": "fr" if i % 3 == 0 else "en"}}
        rows.append(r)
    rows[5]["__stats__"] = {"num_words": None, "ratio": 0.5}  # a missing stat
    rows[7]["src"] = None
    return rows


@pytest.fixture
def data(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    return str(p)


def run(capsys, *argv):
    code = main(["inspect", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def ids(capsys, path, where, *extra):
    code, out, err = run(capsys, path, "--where", where, "--json", "-n", "0", *extra)
    assert code == 0, err
    return [json.loads(line)["id"] for line in out.splitlines()]


def test_where_nested_stats_strings_in_len_boolean(data, capsys):
    assert ids(capsys, data, "__stats__.num_words < 5") == ["doc-0", "doc-1", "doc-2"]
    assert ids(capsys, data, "stats.num_words < 5") == ["doc-0", "doc-1", "doc-2"]  # the shorthand
    assert ids(capsys, data, "__dj__stats__.num_words < 4") == ["doc-0", "doc-1"]  # Data-Juicer's name
    assert ids(capsys, data, "10 <= stats.num_words < 13") == ["doc-8", "doc-9", "doc-10"]  # chained
    assert ids(capsys, data, "meta.lang == 'fr' and stats.num_words > 30") == ["doc-30", "doc-33", "doc-36", "doc-39"]
    assert ids(capsys, data, "src in ['web'] and stats.ratio >= 3.5") == ["doc-35", "doc-37", "doc-39"]
    assert ids(capsys, data, "id in ('doc-3', 'doc-4', 'nope')") == ["doc-3", "doc-4"]
    assert ids(capsys, data, "len(text) < 15") == ["doc-0", "doc-1"]  # "sample 1 word " is 14 characters
    assert ids(capsys, data, "len(tags) == 2 and not id.endswith('0')") == \
        [f"doc-{i}" for i in range(0, 40, 4) if i % 10]
    assert ids(capsys, data, "'a' in tags and stats.num_words > 30") == ["doc-32", "doc-36"]  # list element
    assert ids(capsys, data, '"word word word" in text and stats.num_words < 6') == ["doc-3"]  # substring
    assert ids(capsys, data, "text.startswith('sample 1') and len(text) < 70") == ["doc-1", "doc-10", "doc-11"]
    assert ids(capsys, data, "id.matches('^doc-3[5-9]$') or re('-0$', id)") == \
        ["doc-0", "doc-35", "doc-36", "doc-37", "doc-38", "doc-39"]
    assert ids(capsys, data, "stats.num_words % 10 == 0 and stats.num_words / 4 > 5") == ["doc-28", "doc-38"]
    assert ids(capsys, data, "(src + '/' + meta.lang).upper() == 'BOOKS/FR' and stats.num_words < 10") == \
        ["doc-0", "doc-6"]
    assert ids(capsys, data, "field('src') == 'books' and stats.num_words < 4") == ["doc-0"]


def test_missing_values_never_match_a_comparison(data, capsys):
    assert ids(capsys, data, "stats.num_words is None") == ["doc-5"]
    assert ids(capsys, data, "src is None") == ["doc-7"]
    assert ids(capsys, data, "src == None") == ["doc-7"]
    every = [f"doc-{i}" for i in range(40)]
    # x != v and x not in [...] skip the missing value; not (x == v) keeps it
    assert "doc-5" not in ids(capsys, data, "stats.num_words != 3")
    assert "doc-7" not in ids(capsys, data, "src != 'books'")
    assert "doc-7" not in ids(capsys, data, "src not in ['books']")
    assert "doc-7" in ids(capsys, data, "not (src == 'books')")
    assert "doc-5" not in ids(capsys, data, "stats.num_words * 2 > -1")  # arithmetic on null is null
    assert ids(capsys, data, "stats.num_words >= 0 or stats.num_words is None") == every
    assert ids(capsys, data, "src in ['web', None] and stats.ratio < 0.8") == ["doc-1", "doc-3", "doc-5", "doc-7"]


def test_unknown_field_names_the_closest_and_exits_2(data, capsys):
    code, out, err = run(capsys, data, "--where", "stats.num_word < 50")
    assert code == 2 and out == ""
    assert err.strip() == "error: --where: unknown field 'stats.num_word'; did you mean 'stats.num_words'?"
    code, _, err = run(capsys, data, "--where", "lang == 'en'")
    assert code == 2 and "unknown field 'lang'" in err and "Traceback" not in err
    code, _, err = run(capsys, data, "--fields", "text,stats.ratoi")
    assert code == 2 and "did you mean 'stats.ratio'?" in err


def test_syntax_and_type_errors_exit_2_with_the_position(data, capsys):
    code, out, err = run(capsys, data, "--where", "stats.num_words < < 5")
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert lines[0] == "error: --where: invalid syntax at column 19"
    assert lines[1] == "  stats.num_words < < 5"
    assert lines[2] == "  " + " " * 18 + "^"
    code, _, err = run(capsys, data, "--where", "src = 'web'")
    assert code == 2 and "use == to compare" in err
    code, _, err = run(capsys, data, "--where", "text > 5")  # a string never compares with a number
    assert code == 2 and err.splitlines()[0] == "error: --where: cannot compare text (string) with 5 (integer)"
    code, _, err = run(capsys, data, "--where", "lenn(text) > 5")
    assert code == 2 and "unknown function lenn(); did you mean 'len'?" in err
    code, _, err = run(capsys, data, "--where", "__import__('os')")
    assert code == 2 and "unknown function __import__()" in err
    code, _, err = run(capsys, data, "--where", "__import__('os').system('true')")
    assert code == 2 and "unknown method .system()" in err
    code, _, err = run(capsys, data, "--where", "text.matches('(')")
    assert code == 2 and "bad regular expression" in err
    code, _, err = run(capsys, str(data) + ".missing", "--where", "x > 1")
    assert code == 2 and "does not exist" in err


def test_json_output_is_the_input_rows_exactly(tmp_path, capsys):
    rows = [{"text": "a", "n": 1, "x": {"deep": [1, 2.5, None]}},
            {"text": "b", "n": 2.5, "big": 123456789012345678901234567890},  # mixed types, a 30-digit int
            {"text": "c", "n": None, "__stats__": {"num_words": 1}}]
    p = tmp_path / "mixed.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, out, _ = run(capsys, str(p), "--json")
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == rows  # no id added, nothing changed
    code, out, _ = run(capsys, str(p), "--json", "--where", "n > 2")  # n is raw JSON here (ints and a float)
    assert [json.loads(line) for line in out.splitlines()] == [rows[1]]
    code, out, _ = run(capsys, str(p), "--json", "--fields", "text,stats.num_words")
    assert [json.loads(line) for line in out.splitlines()] == \
        [{"text": "a"}, {"text": "b"}, {"text": "c", "stats.num_words": 1}]


def test_n_stops_reading_a_huge_file_early(tmp_path, capsys, monkeypatch):
    p = tmp_path / "big.jsonl"
    with open(p, "w", encoding="utf-8") as f:
        for i in range(200_000):
            f.write('{"text": "row %d", "__stats__": {"num_words": %d}}\n' % (i, 100 if i in (3, 7, 9) else 2))
    import gristmill.io.formats as formats
    real, pulled = formats.read_shard, []

    def counting(shard, opts):  # the rows the reader handed over
        for item in real(shard, opts):
            pulled.append(getattr(item, "num_rows", 0))
            yield item
    monkeypatch.setattr(formats, "read_shard", counting)
    code, out, err = run(capsys, str(p), "--where", "stats.num_words > 50", "-n", "2", "--json")
    assert code == 0
    assert 0 < sum(pulled) <= 1000  # one batch of the 200,000 rows
    assert [json.loads(line)["text"] for line in out.splitlines()] == ["row 3", "row 7"]
    m = re.search(r"(\d[\d,]*) matching of (\d[\d,]*) rows read", err)
    assert m and int(m.group(1)) == 2 and int(m.group(2).replace(",", "")) == 8  # up to the second match
    assert "stopped early" in err
    code, out, err = run(capsys, str(p), "--where", "stats.num_words > 50", "-n", "1", "--skip", "2", "--json")
    assert [json.loads(line)["text"] for line in out.splitlines()] == ["row 9"]


def test_whole_file_read_when_fewer_matches_than_n(data, capsys):
    code, out, err = run(capsys, data, "--where", "stats.num_words < 4")
    assert code == 0
    assert err.strip() == "2 matching of 40 rows read"
    code, out, err = run(capsys, data, "--where", "stats.num_words > 1000")
    assert code == 0 and out == ""
    assert err.strip() == "no rows match 'stats.num_words > 1000' (40 rows read)"


def test_panels_show_text_position_and_flattened_stats(data, capsys):
    code, out, err = run(capsys, data, "--where", "id == 'doc-12'", "--width", "20")
    assert code == 0
    assert "doc-12" in out and "d.jsonl row 13" in out
    assert "sample 12 word word … (+50 chars)" in out
    assert "num_words=14  ratio=1.2" in out and "lang=fr" in out
    assert re.search(r"src\s+books", out)
    assert err.strip() == "1 matching of 40 rows read"
    code, out, _ = run(capsys, data, "--where", "id == 'doc-12'", "--fields", "stats.ratio,src")
    assert "ratio" in out and "1.2" in out and "books" in out and "sample 12" not in out


def test_parquet(tmp_path, capsys):
    rows = _rows()
    p = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(rows), p, row_group_size=7)
    assert ids(capsys, str(p), "stats.num_words < 5 or (meta.lang == 'fr' and stats.ratio > 3.5)") == \
        ["doc-0", "doc-1", "doc-2", "doc-36", "doc-39"]
    code, out, _ = run(capsys, str(p), "--where", "'b' in tags and stats.num_words > 35", "--json")
    got = [json.loads(line) for line in out.splitlines()]
    want = [r for r in rows if "b" in r["tags"] and (r["__stats__"]["num_words"] or 0) > 35]
    assert got == want and [r["id"] for r in got] == ["doc-36"]
    code, out, _ = run(capsys, str(p), "--where", "id == 'doc-20'")
    assert "d.parquet row 21" in out


def test_parquet_without_ids_json_leaves_out_the_made_id(tmp_path, capsys):
    rows = [{"text": f"t{i}", "n": i} for i in range(5)]
    p = tmp_path / "plain.parquet"
    pq.write_table(pa.Table.from_pylist(rows), p)
    code, out, _ = run(capsys, str(p), "--json", "--where", "n >= 3")
    assert [json.loads(line) for line in out.splitlines()] == rows[3:]
    code, out, _ = run(capsys, str(p), "--where", "id == 'plain.parquet:4'")  # the made id can be filtered on
    assert "plain.parquet row 5" in out


def test_removed_samples_file(tmp_path, capsys):
    """WORK/removed/NN-op.jsonl rows: {"op", "position", "reason", "row": {...}} without a top-level text."""
    removed = []
    for i in range(12):
        row = {"id": f"r{i}", "text": f"removed text {i}", "__stats__": {"num_words": i * 10}}
        if i % 2:
            row["__stats__"]["lang"] = "en"  # stats keys differ between rows: `row` is held as raw JSON
        removed.append({"op": "words_num_filter", "position": 0,
                        "reason": "num_words < 50" if i < 5 else "num_words > 100", "row": row})
    p = tmp_path / "00-words_num_filter.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in removed), encoding="utf-8")
    code, out, err = run(capsys, str(p), "--where", "reason == 'num_words < 50' and row.__stats__.num_words > 15",
                         "--json")
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == removed[2:5]
    code, out, err = run(capsys, str(p), "--where", "row.__stats__.lang == 'en' and row.__stats__.num_words > 80")
    assert code == 0
    assert "r9" in out and "r11" in out and "removed text 9" in out and "num_words=90  lang=en" in out
    assert "2 matching of 12 rows read" in err
    code, _, err = run(capsys, str(p), "--where", "row.__stats__.num_wrds > 1")
    assert code == 2 and "did you mean 'row.__stats__.num_words'?" in err


def test_interactive_paging_through_subprocess(data):
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "inspect", data, "--where", "stats.num_words < 6",
                          "-i", "--width", "0"], input="n\nn\np\n?\nx\n/src == 'web'\nq\n", capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    shown = re.findall(r"doc-\d+", res.stdout)
    # first match, n, n, p (back to the second), then the new filter continues after doc-2: doc-3 is web
    assert shown == ["doc-0", "doc-1", "doc-2", "doc-1", "doc-3"]
    assert "commands: Enter or n = next match" in res.stderr
    assert "unknown command 'x'" in res.stderr
    assert "filter: src == 'web'" in res.stderr
    assert "Traceback" not in res.stderr


def test_interactive_bad_filter_keeps_the_old_one_and_end_of_matches(data):
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "inspect", data, "--where", "stats.num_words < 4",
                          "-i"], input="/stats.nope > 1\nn\nn\nn\n", capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert re.findall(r"doc-\d+", res.stdout) == ["doc-0", "doc-1"]
    assert "unknown field 'stats.nope'" in res.stderr
    assert "no more matches (40 rows read)" in res.stderr
    assert "2 matching of 40 rows read" in res.stderr


def test_no_prompt_without_interactive(data):
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "inspect", data, "-n", "2"], input="q\n",
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "[n]ext" not in res.stderr + res.stdout
    assert re.findall(r"doc-\d+", res.stdout) == ["doc-0", "doc-1"]
