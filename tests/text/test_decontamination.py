"""ngram_decontamination_filter: datatrove's normalisation, exactly the documents that share an n-gram of n
words with a benchmark item go (and those sharing n-1 stay), reasons naming the file and the item, many
files in one pass, JSONL / .jsonl.gz / Parquet."""
import gzip
import json
import random
import re
import unicodedata

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gristmill.dataset import Dataset
from gristmill.ops.text import _decontam as D
from gristmill.registry import create_op

# datatrove's punctuation, written out independently of gristmill's copy (charclass.DT_PUNCTUATION)
PUNCT = set("!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»") | {
    chr(x) for a, b in ((0, 9), (11, 13), (13, 32), (127, 160)) for x in range(a, b)}
NUM = re.compile(r"(?:\d+)(?:[.,،٫⎖⎗⎘]\d+)?")


def simplify(text: str) -> str:
    """datatrove's simplify_text with its default config, from its documented steps (Python's re, not RE2)."""
    text = NUM.sub("0", text.lower())
    text = "".join(" " if c in PUNCT else c for c in text)
    text = re.sub(r"\s+", " ", text.strip())
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn").strip()


SAMPLES = [
    "Hello, World!  It's 3.14 o'clock\ton Tuesday…",
    "Café déjà-vu — naïve RÉSUMÉ, 1,000,000 people; 12.5% (approx.)",
    "«Quoted» text: „German“ ‘single’ [brackets] {braces} <angles> @user #tag",
    "中文文本，包含标点。还有数字１２３和全角字符！",
    "Ελληνικά κείμενα με τόνους: άέήίόύώ ΐΰ",
    "tabs\tand\nnewlines\r\nand\u00a0nbsp\u2003em-space\u3000ideographic",
    "Arabic digits ٣٤٥ and ٣٫٥ and Devanagari ४२; control\x07chars\x1fhere\x85",
    "",
    "   ",
    "İstanbul ŞEHİR straße ǅ",
]


def test_normalisation_is_datatrove_simplify_text():
    got = D.normalize(pa.array(SAMPLES)).to_pylist()
    assert got == [simplify(s) for s in SAMPLES]
    flat, off = D.words(pa.array(["A b, c", "", "  ", "d"]))
    assert flat.to_pylist() == ["a", "b", "c", "d"] and off.tolist() == [0, 3, 3, 3, 4]


QUESTION = ("A farmer plants corn in a field that had soybeans the previous year. Which process most likely "
            "added nitrogen to the soil for the corn crop?")
ANSWER = "Nitrogen fixation by bacteria living in the root nodules of the soybean plants"


def _bench(tmp_path, name="arc.jsonl", items=None):
    p = tmp_path / name
    items = items or [{"id": "Mercury_7175875", "question": QUESTION,
                       "choices": {"text": ["decomposition", "nitrogen fixation"], "label": ["A", "B"]},
                       "answer": ANSWER}]
    p.write_text("".join(json.dumps(i) + "\n" for i in items))
    return str(p)


def _words(s):
    return simplify(s).split(" ")


def test_removes_exactly_the_documents_sharing_n_words(tmp_path):
    path = _bench(tmp_path)
    op = create_op("ngram_decontamination_filter", {"benchmarks": [path]})
    q = QUESTION.split()
    filler = "The county fair opened on Saturday with a parade."
    docs = [
        {"id": "13-start", "text": f"{' '.join(q[:13])} {filler}"},                       # exactly 13 words
        {"id": "12-start", "text": f"{' '.join(q[:12])} {filler}"},                       # 12: kept
        {"id": "13-end", "text": f"{filler} {' '.join(q[-13:])}"},
        {"id": "12-mid", "text": f"{' '.join(q[3:15])} {filler} {' '.join(q[16:28])}"},  # two runs of 12: kept
        {"id": "case+punct", "text": "A FARMER plants corn in a field — that had soybeans; the previous YEAR..."},
        {"id": "span", "text": f"{' '.join(q[-6:])} {' '.join(ANSWER.split()[:7])}"},  # question → answer
        {"id": "answer", "text": f"Notes: {ANSWER.lower()}!"},
        {"id": "clean", "text": filler * 3},
        {"id": "empty", "text": ""},
    ]
    kept, removed = op.apply(docs, removed=True)
    assert [r["id"] for r in kept] == ["12-start", "12-mid", "clean", "empty"]
    assert [r["id"] for r in removed] == ["13-start", "13-end", "case+punct", "span", "answer"]
    assert {r["__reason__"] for r in removed} == {"benchmark arc.jsonl item Mercury_7175875"}
    first = removed[0]["__stats__"]
    assert first == {"decontam_benchmark": "arc.jsonl", "decontam_item": "Mercury_7175875",
                     "decontam_ngram": " ".join(_words(QUESTION)[:13])}
    assert kept[0]["__stats__"] == {"decontam_benchmark": "", "decontam_item": "", "decontam_ngram": ""}
    # without overlap the question → answer span is no n-gram of the item; n is a param
    no_overlap = create_op("ngram_decontamination_filter", {"benchmarks": [path], "overlap": False})
    assert [r["id"] for r in no_overlap.apply(docs)] == ["12-start", "12-mid", "span", "clean", "empty"]
    n12 = create_op("ngram_decontamination_filter", {"benchmarks": [path], "n": 12})
    assert [r["id"] for r in n12.apply(docs)] == ["clean", "empty"]


def test_matches_a_brute_force_set_of_ngrams_over_many_files(tmp_path):
    """40 benchmark files (JSONL, .jsonl.gz, Parquet) of random items; documents splice runs of 3..9 words
    of items into filler; n=6. The removed set and each first hit equal a brute force over word tuples."""
    vocab = [f"w{i}" for i in range(300)] + ["Über", "naïve", "3.5", "co-op", "x's"]
    n = 6
    rng = random.Random(1234)
    paths, items_by_file = [], []
    for f in range(40):
        items = [{"question": " ".join(rng.choice(vocab) for _ in range(rng.randrange(4, 25))),
                  "answer": rng.choice(vocab)} for _ in range(5)]
        items_by_file.append(items)
        if f % 3 == 0:
            p = tmp_path / f"b{f:02d}.parquet"
            pq.write_table(pa.Table.from_pylist(items), p)
        elif f % 3 == 1:
            p = tmp_path / f"b{f:02d}.jsonl.gz"
            with gzip.open(p, "wt") as fh:
                fh.writelines(json.dumps(i) + "\n" for i in items)
        else:
            p = tmp_path / f"b{f:02d}.jsonl"
            p.write_text("".join(json.dumps(i) + "\n" for i in items))
        paths.append(str(p))
    first_hit = {}  # n-gram → (file, item) of its first occurrence
    for f, items in enumerate(items_by_file):
        for k, it in enumerate(items):
            w = _words(f"{it['question']} {it['answer']}")
            for i in range(len(w) - n + 1):
                first_hit.setdefault(tuple(w[i:i + n]), (paths[f].rsplit("/", 1)[1], str(k)))
    docs = []
    for d in range(300):
        f = rng.randrange(40)
        it = rng.choice(items_by_file[f])
        w = f"{it['question']} {it['answer']}".split()
        run = rng.randrange(3, 10)
        s = rng.randrange(0, max(1, len(w) - run + 1))
        filler = " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(rng.randrange(0, 8)))
        docs.append({"id": str(d), "text": f"{filler} {' '.join(w[s:s + run])} {filler}"})
    expected = {}
    for doc in docs:
        w = _words(doc["text"])
        hit = next((first_hit[g] for g in (tuple(w[i:i + n]) for i in range(len(w) - n + 1)) if g in first_hit), None)
        if hit:
            expected[doc["id"]] = f"benchmark {hit[0]} item {hit[1]}"
    op = create_op("ngram_decontamination_filter", {"benchmarks": paths, "n": n})
    kept, removed = op.apply(docs, removed=True)
    assert {r["id"]: r["__reason__"] for r in removed} == expected
    assert 50 < len(expected) < 250  # both outcomes are well exercised
    assert len(kept) + len(removed) == len(docs)


def test_report_counts_hits_per_benchmark_and_bad_files_fail_at_load(tmp_path):
    a = _bench(tmp_path, "a.jsonl")
    b = _bench(tmp_path, "b.jsonl", [{"text": "the quick brown fox jumps over the lazy dog near the old river bank today"}])
    rows = [{"id": "1", "text": QUESTION}, {"id": "2", "text": "The quick brown fox jumps over the lazy dog near "
                                                                  "the old river bank today, said the paper."},
            {"id": "3", "text": "Nothing to see here."}, {"id": "4", "text": QUESTION.upper()}]
    rep = Dataset.from_list(rows).process(create_op("ngram_decontamination_filter", {"benchmarks": [a, b]})) \
        .export(str(tmp_path / "out.jsonl"), np=2, work_dir=str(tmp_path / "w"))
    op = rep["ops"][-1]
    assert op["reasons"] == {"benchmark a.jsonl item Mercury_7175875": 2, "benchmark b.jsonl item 0": 1}
    assert [json.loads(x)["id"] for x in (tmp_path / "out.jsonl").read_text().splitlines()] == ["3"]
    with pytest.raises(ValueError, match="benchmark file not found: .*missing.jsonl"):
        create_op("ngram_decontamination_filter", {"benchmarks": [a, str(tmp_path / "missing.jsonl")]})
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "ok"}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl: line 2 is not JSON"):
        create_op("ngram_decontamination_filter", {"benchmarks": [str(bad)]}).apply([{"text": "x"}])
