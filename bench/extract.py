"""HTML main-text extraction: throughput per core and quality, our `html_extract_mapper` vs the libraries.

    python bench/extract.py [--html-dir /tmp/corpus/html] [--pages 300]
                            [--eval-dir /tmp/trafeval/tests] [--eval-limit 0] [--extractors trafilatura,resiliparse,justext]

Throughput: one process (one core), the same pages and the same extractor options through (a) the library
called directly in a loop and (b) our mapper on Arrow batches (title + URL into meta, per-document SIGALRM
timeout, Arrow in/out). Pages: Debian documentation HTML (built by ../shared/bench/make-corpus.sh) and the
Common Crawl WARC samples, read with our WARC reader.

Quality: trafilatura's evaluation set (tests/eval/*.html + tests/evaldata.json from the trafilatura git
repository; the PyPI sdist does not ship it). Each page has text snippets that must appear ("with") and
must not appear ("without") in the extraction; precision/recall/F1/accuracy count snippets the same way
trafilatura's own evaluation does. We score the library's direct output and ours on the same decoded pages.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import re
import sys
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gristmill.core.charset import decode_html  # noqa: E402
from gristmill.ops.web.extract import DEFAULT_OPTIONS, justext_stoplist  # noqa: E402
from gristmill.registry import create_op  # noqa: E402


def direct_fn(name: str):
    """The library's own call, with the options our mapper uses by default."""
    opts = dict(DEFAULT_OPTIONS[name])
    if name == "trafilatura":
        import trafilatura
        return lambda h: trafilatura.extract(h, **opts) or ""
    if name == "resiliparse":
        from resiliparse.extract.html2text import extract_plain_text
        return lambda h: extract_plain_text(h, **opts)
    import justext
    stop = justext_stoplist(opts.pop("stoplist"))
    return lambda h: "\n\n".join(p.text for p in justext.justext(h, stop, **opts) if not p.is_boilerplate)


def debian_pages(html_dir: str, n: int) -> list[str]:
    files = sorted(str(p) for p in Path(html_dir).rglob("*.html") if p.is_file() and p.stat().st_size > 2000)
    if not files:
        return []
    step = max(1, len(files) // n)
    out = []
    for f in files[::step][:n]:
        body = Path(f).read_bytes()
        out.append(decode_html(body, None)[0])
    return out


def warc_pages() -> list[str]:
    from gristmill.io.base import ReadOptions, Shard
    from gristmill.io.warc import WarcReader
    pages = []
    for f in ("cc-2020-34-sample.warc.gz", "whirlwind.warc.gz"):
        path = ROOT / "tests" / "web" / "data" / f
        for b in WarcReader().read(Shard(str(path), "warc"), ReadOptions()):
            if isinstance(b, pa.RecordBatch):
                pages.extend(b.column("text").to_pylist())
    return pages


# CPU time of this process: on a shared machine, other processes' load skews wall-clock time far more
clock = time.process_time


def time_direct(fn, pages) -> float:
    # fresh string objects, as a pipeline gets them: a reused str caches its UTF-8 form, which the parsers
    # would otherwise get for free from the second round on
    pages = [p.encode().decode() for p in pages]
    gc.collect()
    t = clock()
    for h in pages:
        fn(h)
    return clock() - t


def time_ours(op, batches) -> float:
    gc.collect()
    t = clock()
    for b in batches:
        op.process_batch(b)
    return clock() - t


def throughput(name: str, pages: list[str], rounds: int) -> tuple[float, float]:
    fn = direct_fn(name)
    op = create_op("html_extract_mapper", {"extractor": name})
    batches = [pa.RecordBatch.from_pylist([{"text": h, "url": f"http://x/{i}"} for i, h in enumerate(pages[j:j + 100])])
               for j in range(0, len(pages), 100)]
    fn(pages[0]), op.process_batch(batches[0].slice(0, 1))  # warm up imports and caches
    d, o = [], []
    for _ in range(rounds):  # interleaved, so that drift in machine load hits both alike
        d.append(time_direct(fn, pages))
        o.append(time_ours(op, batches))
    return len(pages) / min(d), len(pages) / min(o)


def warc_reading(rounds: int = 5, copies: int = 20) -> None:
    """Our WARC reader (records → decoded rows in Arrow) vs bare FastWARC iteration over the same bytes."""
    import tempfile
    from fastwarc.warc import ArchiveIterator, WarcRecordType
    from gristmill.io.base import ReadOptions, Shard
    from gristmill.io.warc import WarcReader
    src = (ROOT / "tests" / "web" / "data" / "cc-2020-34-sample.warc.gz").read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.warc.gz")
        with open(path, "wb") as f:
            for _ in range(copies):
                f.write(src)

        def bare():
            n = nbytes = 0
            for r in ArchiveIterator(path, record_types=WarcRecordType.response, parse_http=True):
                nbytes += len(r.reader.read())
                n += 1
            return n, nbytes

        def ours():
            return sum(b.num_rows for b in WarcReader().read(Shard(path, "warc"), ReadOptions())
                       if isinstance(b, pa.RecordBatch))
        n, nbytes = bare()
        assert ours() == n
        tb, to = [], []
        for _ in range(rounds):
            t = clock(); bare(); tb.append(clock() - t)
            t = clock(); ours(); to.append(clock() - t)
    print(f"# WARC reading, one core: {n} HTML responses, {nbytes / 1e6:.1f} MB of payload")
    print(f"  FastWARC iteration only   {n / min(tb):8.0f} records/s {nbytes / 1e6 / min(tb):7.1f} MB/s")
    print(f"  our reader (rows, decoded){n / min(to):8.0f} records/s {nbytes / 1e6 / min(to):7.1f} MB/s\n")


def norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def score(results: dict[str, str], evaldata: dict) -> dict:
    tp = fp = fn = tn = 0
    for url, item in evaldata.items():
        res = norm(results.get(url) or "")
        t = sum(1 for w in item["with"] if norm(w) in res)
        f = sum(1 for w in item["without"] if norm(w) in res)
        tp, fn = tp + t, fn + len(item["with"]) - t
        fp, tn = fp + f, tn + len(item["without"]) - f
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0,
            "accuracy": (tp + tn) / (tp + tn + fp + fn)}


def quality(name: str, docs: dict[str, str], evaldata: dict):
    fn = direct_fn(name)
    op = create_op("html_extract_mapper", {"extractor": name, "on_error": "empty", "timeout": 60})
    urls = sorted(docs)
    t = clock()
    direct = {}
    for u in urls:
        try:
            direct[u] = fn(docs[u])
        except Exception:  # noqa: BLE001 - a library crash counts as a miss, as in trafilatura's evaluation
            direct[u] = ""
    td = clock() - t
    t = clock()
    ours = {}
    for j in range(0, len(urls), 100):
        chunk = urls[j:j + 100]
        b = op.process_batch(pa.RecordBatch.from_pylist([{"text": docs[u], "url": u} for u in chunk]))
        ours.update(zip(chunk, b.column("text").to_pylist()))
    to = clock() - t
    same = sum(1 for u in urls if (direct[u] or "") == (ours[u] or ""))
    return score(direct, evaldata), score(ours, evaldata), same, len(urls) / td, len(urls) / to


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--html-dir", default="/tmp/corpus/html")
    ap.add_argument("--pages", type=int, default=300, help="Debian pages for the throughput test")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--eval-dir", default="/tmp/trafeval/tests",
                    help="trafilatura's tests/ directory (with eval/ and evaldata.json)")
    ap.add_argument("--eval-limit", type=int, default=0, help="score only the first N eval pages (0: all)")
    ap.add_argument("--extractors", default="trafilatura,resiliparse,justext")
    args = ap.parse_args()
    names = args.extractors.split(",")

    warc_reading()
    corpora = {"cc-warc": warc_pages() * 6}  # 17 pages, repeated so that a round is long enough to time
    deb = debian_pages(args.html_dir, args.pages) if os.path.isdir(args.html_dir) else []
    if deb:
        corpora["debian-html"] = deb
    else:
        print(f"(no Debian HTML under {args.html_dir}: run ../shared/bench/make-corpus.sh; throughput on WARC pages only)")
    print(f"# throughput, one core: pages per CPU-second, best of {args.rounds} interleaved rounds")
    print(f"{'extractor':12s} {'corpus':12s} {'pages':>6s} {'MB':>6s} {'direct p/s':>11s} {'ours p/s':>9s} "
          f"{'overhead':>9s} {'µs/page':>8s}")
    for name in names:
        for cname, pages in corpora.items():
            mb = sum(len(p.encode()) for p in pages) / 1e6
            d, o = throughput(name, pages, args.rounds)
            print(f"{name:12s} {cname:12s} {len(pages):6d} {mb:6.1f} {d:11.1f} {o:9.1f} {100 * (d / o - 1):8.1f}% "
                  f"{1e6 * (1 / o - 1 / d):8.0f}")
            sys.stdout.flush()

    ev = Path(args.eval_dir)
    if not (ev / "evaldata.json").exists():
        print(f"\n# quality: trafilatura's evaluation set not found at {ev} (it is not in the PyPI sdist; it lives "
              f"in the trafilatura git repository under tests/eval and tests/evaldata.json) -- skipped")
        return 0
    evaldata = json.loads((ev / "evaldata.json").read_text())
    docs = {}
    for url, item in sorted(evaldata.items()):
        for sub in ("eval", "cache"):
            p = ev / sub / item["file"]
            if p.is_file():
                docs[url] = decode_html(p.read_bytes(), None)[0]
                break
    if args.eval_limit:
        docs = dict(list(docs.items())[: args.eval_limit])
    evaldata = {u: evaldata[u] for u in docs}
    print(f"\n# quality on trafilatura's evaluation set: {len(docs)} pages, "
          f"{sum(len(i['with']) + len(i['without']) for i in evaldata.values())} snippets")
    print(f"{'extractor':12s} {'':7s} {'precision':>9s} {'recall':>7s} {'F1':>6s} {'acc':>6s} {'pages/s':>8s}  identical")
    for name in names:
        sd, so, same, pd, po = quality(name, docs, evaldata)
        for label, s, ps in (("direct", sd, pd), ("ours", so, po)):
            print(f"{name:12s} {label:7s} {s['precision']:9.4f} {s['recall']:7.4f} {s['f1']:6.4f} {s['accuracy']:6.4f} "
                  f"{ps:8.1f}" + (f"  {same}/{len(docs)}" if label == "ours" else ""))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
