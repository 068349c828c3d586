"""Tokenize benchmark, English and Chinese: gristmill's full path (read JSONL → tokenize → pack → write) at
np=1 and np=2 next to the raw tokenizer backend on the same texts with the same number of processes, next
to datatrove's DocumentTokenizer, plus the utilisation of the three packing modes at --seq-len.

usage: python bench/tokenize_bench.py [--limit ROWS] [--repeat N] [--reps 3] [--langs en,zh] [--skip-peer] [--work /tmp/bench-tok]
                                     [--corpus /tmp/corpus/corpus.jsonl]

Inputs (built once under --work, 4 JSONL shards per language):
- en: /tmp/corpus/corpus.jsonl (bash ../shared/bench/make-corpus.sh /tmp/corpus) without its Chinese pages,
  plus the non-Chinese documents of ../shared/data/cc-2019-30-sample.jsonl.gz;
- zh: the Chinese pages of the corpus and of the CC sample, plus Debian's Chinese documentation
  (libreoffice-help-zh-cn/-zh-tw help pages and manpages-zh, fetched with apt-get download).
Tokenizer: ../shared/tokenizers/qwen3/tokenizer.json.gz. Peer: /tmp/peers/dt (../shared/bench/peers/setup.sh).

"raw backend" is the tiktoken encoder gristmill verified against the Qwen3 tokenizer.json, run on texts
already in memory (np=2: two processes, each on half of the texts, timed from a common start), with the
same per-document EOS the full path adds. The full path is `gristmill tokenize --np N` timed end to end as a
user runs it (interpreter start, imports, loading the tokenizer, checking the fast path against the
reference, reading, tokenizing, packing, writing `npy` rows, the summary); datatrove likewise. The machine
is shared: raw and full runs alternate --reps times (min and median reported), and CPU seconds (user + sys
of every process: the encode loops for raw, the command and its workers for the others) are printed too.
"""
from __future__ import annotations

import os
import sys

# this file is named like the stdlib module `tokenize`: keep its folder off the import path
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse  # noqa: E402
import gzip  # noqa: E402
import html.parser  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

SHARED = os.path.normpath(os.path.join(_HERE, "..", "..", "shared"))
if not os.path.isdir(SHARED):
    SHARED = "/work/shared"
TOKENIZER_GZ = os.path.join(SHARED, "tokenizers", "qwen3", "tokenizer.json.gz")
CC = os.path.join(SHARED, "data", "cc-2019-30-sample.jsonl.gz")
CORPUS = "/tmp/corpus/corpus.jsonl"
PEER = os.path.join(SHARED, "bench", "peers", "dt_tokenize.py")
DT_PY = "/tmp/peers/dt/bin/python"
ZH_DEBS = ["libreoffice-help-zh-cn", "libreoffice-help-zh-tw", "manpages-zh"]
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def is_zh(t: str) -> bool:
    return len(_CJK.findall(t[:4000])) > 0.2 * min(len(t), 4000)


class _Text(html.parser.HTMLParser):
    SKIP = {"script", "style", "nav", "head", "noscript"}
    BLOCK = {"p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "pre", "section", "dt", "dd"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.skip = [], 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skip += 1
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skip:
            self.skip -= 1
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


def _html_text(raw: str) -> str:
    p = _Text()
    p.feed(raw)
    return re.sub(r"\n\s*\n+", "\n\n", "".join(p.parts)).strip()


_ROFF_ESC = re.compile(r"\\f[BIRP]|\\f\(..|\\\(..|\\[-&e|^ ]|\\s[-+]?\d")


def _man_text(raw: str) -> str:
    """roff source → readable text: comments dropped, macro names stripped, font escapes removed."""
    out = []
    for line in raw.splitlines():
        if line.startswith(('.\\"', "'\\\"")):
            continue
        if line.startswith("."):
            parts = line.split(None, 1)
            line = parts[1].replace('"', "") if len(parts) > 1 else ""
        out.append(_ROFF_ESC.sub("", line))
    return re.sub(r"\n\s*\n+", "\n\n", "\n".join(out)).strip()


def debian_zh_docs(work: str) -> list[str]:
    """Chinese documentation from Debian packages (apt-get download; nothing is installed)."""
    d = os.path.join(work, "zh-debs")
    root = os.path.join(d, "root")
    if not os.path.isdir(root):
        os.makedirs(d, exist_ok=True)
        try:
            subprocess.run(["apt-get", "download", *ZH_DEBS], cwd=d, check=True, capture_output=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as e:
            print(f"  (no Debian Chinese docs: {e})")
            return []
        for f in sorted(os.listdir(d)):
            if f.endswith(".deb"):
                subprocess.run(["dpkg-deb", "-x", os.path.join(d, f), root], check=True)
    texts = []
    for dirpath, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            p = os.path.join(dirpath, name)
            try:
                if name.endswith((".html", ".htm", ".xhtml")):
                    t = _html_text(open(p, encoding="utf-8", errors="replace").read())
                elif "/man/" in p and name.endswith(".gz"):
                    t = _man_text(gzip.open(p, "rt", encoding="utf-8", errors="replace").read())
                else:
                    continue
            except (OSError, EOFError):
                continue
            if len(t) > 200 and is_zh(t):
                texts.append(t)
    return texts


def _write_shards(texts: list[str], inp: str) -> None:
    os.makedirs(inp)
    outs = [open(os.path.join(inp, f"shard-{i}.jsonl"), "w", encoding="utf-8") for i in range(4)]
    for i, t in enumerate(texts):
        outs[i % 4].write(json.dumps({"id": str(i), "text": t}, ensure_ascii=False) + "\n")
    for o in outs:
        o.close()


def prepare(work: str, limit: int | None, repeat: int = 1, corpus_path: str = CORPUS) -> tuple[str, dict[str, str]]:
    """(tokenizer.json path, {lang: input dir}) — built once per --work, --limit and --repeat (the
    documents written ``repeat`` times over: a bigger input of the same real text, to show how the fixed
    costs of a run weigh less as inputs grow; tiktoken keeps no cache, so repeats cost what new text does)."""
    tok = os.path.join(work, "tokenizer.json")
    if not os.path.exists(tok):
        with gzip.open(TOKENIZER_GZ, "rt", encoding="utf-8") as f, open(tok, "w", encoding="utf-8") as g:
            g.write(f.read())
    tag = (f"limit{limit}" if limit else "full") + (f"x{repeat}" if repeat > 1 else "")
    if corpus_path != CORPUS:  # another corpus (e.g. make-corpus.sh ... full): its own input dirs
        tag += "-" + os.path.basename(os.path.dirname(os.path.abspath(corpus_path)))
    dirs = {lang: os.path.join(work, f"in-{lang}-{tag}") for lang in ("en", "zh")}
    if all(os.path.isdir(d) for d in dirs.values()):
        return tok, dirs
    import polars as pl
    corpus = pl.read_ndjson(corpus_path)["text"].to_list()
    with gzip.open(CC, "rt", encoding="utf-8") as f:
        cc = [json.loads(line)["text"] for line in f]
    zh = [t for t in corpus + cc if is_zh(t)]
    en = [t for t in corpus + cc if t and not is_zh(t)]
    zh += debian_zh_docs(work)
    for lang, texts in (("en", en), ("zh", zh)):
        if not os.path.isdir(dirs[lang]):
            _write_shards((texts[:limit] if limit else texts) * repeat, dirs[lang])
    return tok, dirs


def read_texts(inp: str, part: int | None = None, parts: int = 1) -> list[str]:
    import polars as pl  # here, not at the top: spawned workers re-import this script
    out = []
    for f in sorted(os.listdir(inp)):
        out += pl.read_ndjson(os.path.join(inp, f))["text"].to_list()
    out = [t for t in out if t]
    return out if part is None else out[part::parts]


def _raw_worker(tok_json, inp, part, parts, barrier, q):
    """One raw-backend process: load its texts and the backend untimed, then encode after the barrier."""
    from gristmill.tokenize.backends import load_tokenizer
    texts = read_texts(inp, part, parts)
    spec = load_tokenizer(tok_json)
    fast = spec.fast()
    eos = spec.token_id("<|endoftext|>")
    barrier.wait()
    c = time.process_time()
    n = 0
    for i in range(0, len(texts), 1000):
        ids, _ = fast.encode_batch(texts[i:i + 1000], None, eos)
        n += len(ids)
    q.put((n, time.perf_counter(), time.process_time() - c))


def raw_backend(tok_json: str, inp: str, nproc: int) -> tuple[int, float, float]:
    """(tokens, seconds, CPU seconds) for the fast backend alone on every text of ``inp`` with ``nproc``
    processes."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(nproc + 1)
    q = ctx.Queue()
    procs = [ctx.Process(target=_raw_worker, args=(tok_json, inp, i, nproc, barrier, q)) for i in range(nproc)]
    for p in procs:
        p.start()
    barrier.wait()
    t0 = time.perf_counter()
    got = [q.get() for _ in procs]
    for p in procs:
        p.join()
    return sum(g[0] for g in got), max(g[1] for g in got) - t0, sum(g[2] for g in got)


def _timed(cmd: list[str], cwd: str | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds of a command and every process it started."""
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def full_path(tok_json: str, inp: str, work: str, nproc: int, seq_len: int) -> tuple[dict, float, str, float]:
    """(report, wall s, output dir, CPU s) of ``gristmill tokenize --np nproc`` on a fresh work dir."""
    import yaml
    w = os.path.join(work, f"gm-work-np{nproc}")
    out = os.path.join(work, f"gm-out-np{nproc}")
    shutil.rmtree(w, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    cfg = {"tokenizer": tok_json, "sources": inp, "output": out, "format": "npy", "pack": "padded",
           "seq_len": seq_len}
    path = os.path.join(work, f"tokenize-np{nproc}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)
    tl = os.path.join(work, f"timeline-np{nproc}.jsonl")
    if os.path.exists(tl):
        os.remove(tl)
    os.environ["GRISTMILL_TIMELINE"] = tl  # the command's (and its workers') events and CPU seconds
    try:
        t0 = time.time()
        wall, cpu = _timed([sys.executable, "-m", "gristmill.cli", "tokenize", path, "--np", str(nproc), "--work-dir",
                            w, "--no-progress"], cwd=os.path.dirname(_HERE))
    finally:
        del os.environ["GRISTMILL_TIMELINE"]
    with open(os.path.join(out, "report.json")) as f:
        rep = json.load(f)
    rep["_timeline"] = _where_time_goes(tl, t0)
    return rep, wall, out, cpu


def _where_time_goes(path: str, t0: float) -> dict:
    """From the run's timeline (engine/timeline.py): seconds after launch when the first shard started and
    when phase 1 and phase 2 ended, the main process's CPU seconds (at its setup's end and in all), and the
    CPU seconds of the processes that tokenized."""
    try:
        with open(path) as f:
            ev = [json.loads(line) for line in f]
    except (OSError, ValueError):
        return {}
    main = next((e["pid"] for e in ev if e["event"] == "cli main"), None)
    at = {e["event"]: e for e in ev if e["pid"] == main}
    shards = [e for e in ev if e["event"] in ("task start", "task end") and e.get("stage_dir") == "tok"]
    workers = {}
    for e in shards:
        workers[e["pid"]] = e.get("cpu", 0.0)  # the last mark of each: its CPU at its last shard's end
    first = min((e["t"] for e in shards if e["event"] == "task start"), default=None)
    last = max((e["t"] for e in shards if e["event"] == "task end"), default=None)  # a shard's or the check's
    rel = lambda k: round(at[k]["t"] - t0, 2) if k in at else None  # noqa: E731
    return {"first_shard": round(first - t0, 2) if first else None, "setup_done": rel("tokenize setup done"),
            "last_task": round(last - t0, 2) if last else None,
            "early_phase2": rel("phase 2 written before the check ended"),
            "phase1_done": rel("phase 1 done"), "phase2_done": rel("phase 2 done"),
            "main_setup_cpu": round(at.get("tokenize setup done", {}).get("cpu", 0.0), 2),
            "main_cpu": round(at.get("main returned", {}).get("cpu", 0.0), 2),
            "worker_cpu": sorted(round(c, 2) for p, c in workers.items() if p != main)}


def bench_lang(lang: str, tok_json: str, inp: str, work: str, a) -> None:
    from gristmill.tokenize.packing import plan_pack
    from gristmill.tokenize.store import TokenStore
    nbytes = sum(os.path.getsize(os.path.join(inp, f)) for f in os.listdir(inp))
    texts = read_texts(inp)
    text_mb = sum(len(t.encode()) for t in texts) / 1e6
    print(f"\n== {lang}: {len(texts)} documents, {text_mb:.1f} MB of text ({nbytes / 1e6:.1f} MB of JSONL in 4 "
          f"shards, {inp})")
    del texts
    lw = os.path.join(work, lang)
    os.makedirs(lw, exist_ok=True)
    import statistics
    med = statistics.median
    raw: dict[int, list[tuple[float, float]]] = {1: [], 2: []}  # (tok/s, CPU s)
    full: dict[int, list[tuple[dict, float, str, float]]] = {1: [], 2: []}
    # raw and full runs interleaved, raw before and after, because the machine is shared
    for _ in range(a.reps):
        for npw in (1, 2):
            n, s, c = raw_backend(tok_json, inp, npw)
            raw[npw].append((n / s, c))
            full[npw].append(full_path(tok_json, inp, lw, npw, a.seq_len))
            n, s, c = raw_backend(tok_json, inp, npw)
            raw[npw].append((n / s, c))
    for npw in (1, 2):
        rates = [x for x, _ in raw[npw]]
        walls = [f[1] for f in full[npw]]
        rep, cpus = full[npw][0][0], [f[3] for f in full[npw]]
        tokens = rep["tokens"]
        r, tps = med(rates), tokens / med(walls)
        print(f"  np={npw}: raw backend {r / 1e6:.2f}M tok/s median (runs: {', '.join(f'{x / 1e6:.2f}' for x in rates)}; "
              f"{med([c for _, c in raw[npw]]):.2f} CPU s)")
        print(f"        gristmill tokenize (CLI, end to end) {tps / 1e6:.2f}M tok/s = {text_mb / med(walls):.1f} MB/s: "
              f"wall min {min(walls):.2f} s, median {med(walls):.2f} s (runs: {', '.join(f'{x:.2f}' for x in walls)}); "
              f"CPU median {med(cpus):.2f} s -> {tps / r:.2f}x raw by medians, {tokens / min(walls) / max(rates):.2f}x "
              f"best to best (target >= 0.9x)")
        tls = [f[0].get("_timeline") or {} for f in full[npw]]
        if all(tls):
            m = lambda k: med([t[k] for t in tls if t.get(k) is not None] or [float("nan")])  # noqa: E731
            early = sum(t.get("early_phase2") is not None for t in tls)
            print(f"        where the time goes (medians, s after launch): first shard starts {m('first_shard'):.2f}, "
                  f"last task (a shard or the fast-path check) ends {m('last_task'):.2f}, phase 1 ends "
                  f"{m('phase1_done'):.2f}, phase 2 ends {m('phase2_done'):.2f} (written while the check ran in "
                  f"{early} of {len(tls)} runs); main process CPU "
                  f"{m('main_setup_cpu'):.2f} s to its first task, {m('main_cpu'):.2f} s in all; tokenizing processes' "
                  f"CPU {', '.join(f'{c:.2f}' for c in tls[0].get('worker_cpu', []))} s (first run)")
        print(f"        setup {rep['setup_seconds']:.2f}s (tokenizer load + fast-path check: "
              f"{rep['backend_info'].get('verified_docs', 0)} docs from {rep['backend_info'].get('checked_shards', 0)} "
              f"shards), tokenize {rep['tokenize_seconds']:.2f}s, pack+write {rep['write_seconds']:.2f}s; "
              f"backend {rep['backend']} ({rep['backend_info']['reason']}); {tokens:,} tokens, "
              f"{rep['shards']} shards")
    same = open(os.path.join(full[1][0][2], "data.npy"), "rb").read() == open(
        os.path.join(full[2][0][2], "data.npy"), "rb").read()
    print(f"  np=1 and np=2 outputs byte-identical: {same}")

    if not a.skip_peer and os.path.exists(DT_PY):
        out = os.path.join(lw, "dt-out")
        # wall only: datatrove's pool workers end unreaped, so RUSAGE_CHILDREN misses their CPU time
        dt = [_timed([DT_PY, PEER, inp, "shard-*.jsonl", tok_json, out, "2"]) for _ in range(a.peer_reps)]
        dt_s = med([w for w, _ in dt])
        s2 = med([f[1] for f in full[2]])
        dt_tok = sum(os.path.getsize(os.path.join(dp, f)) // 4 for dp, _, fs in os.walk(out) for f in fs
                     if f.endswith(".ds"))
        print(f"  datatrove DocumentTokenizer np=2: {dt_tok / 1e6:.1f}M tokens in {dt_s:.1f}s (runs: "
              f"{', '.join(f'{w:.1f}' for w, _ in dt)}) = {dt_tok / dt_s / 1e6:.2f}M tok/s, "
              f"{text_mb / dt_s:.1f} MB/s; gristmill np=2 is {dt_s / s2:.2f}x faster by median wall "
              f"(target >= 5x)")
    else:
        print("  datatrove: skipped (no /tmp/peers/dt or --skip-peer)")

    tok_dir = os.path.join(lw, "gm-work-np1", "tokenize", "tok")
    names = sorted(f[:-len(".lens.npy")] for f in os.listdir(tok_dir) if f.endswith(".lens.npy"))
    lens = np.concatenate(TokenStore(tok_dir, [names]).lens)
    print(f"  packing at seq_len {a.seq_len}: {len(lens)} documents, median {int(np.median(lens))} tokens, "
          f"{100 * np.mean(lens > a.seq_len + 1):.1f}% longer than a row")
    for mode in ("padded", "concat", "bfd"):
        t = time.perf_counter()
        st = plan_pack(lens, a.seq_len, mode).stats()
        print(f"    {mode:7s} rows {st['rows']:8d}  non-pad {100 * st['utilisation']:.3f}%  truncated "
              f"{st['truncated_tokens']:6d}  docs split {st['docs_split_across_rows']:6d}  "
              f"({time.perf_counter() - t:.2f}s)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/bench-tok")
    ap.add_argument("--limit", type=int, default=None, help="documents per language (default: all)")
    ap.add_argument("--repeat", type=int, default=1, help="write the documents this many times over")
    ap.add_argument("--langs", default="en,zh")
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=3, help="alternated raw/full runs per np (min and median shown)")
    ap.add_argument("--peer-reps", type=int, default=1, help="datatrove runs")
    ap.add_argument("--corpus", default=CORPUS, help="corpus.jsonl of make-corpus.sh (small: the default; full: "
                    "30+ languages, where 'en' means every non-Chinese page)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    tok_json, dirs = prepare(a.work, a.limit, a.repeat, a.corpus)
    for lang in a.langs.split(","):
        bench_lang(lang, tok_json, dirs[lang], os.path.join(a.work, f"run-{lang}-{os.path.basename(dirs[lang])}"), a)


if __name__ == "__main__":
    sys.exit(main())
