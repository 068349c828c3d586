"""Tokenize benchmark: gristmill's full path (read → tokenize → pack → write) next to the raw backend on the
same text and next to datatrove's DocumentTokenizer, plus packing utilisation of the three modes.

usage: python bench/tokenize_bench.py [--skip-peer] [--work /tmp/bench-tok]
Needs /tmp/corpus/corpus.jsonl (bash ../shared/bench/make-corpus.sh), ../shared (Qwen3 tokenizer.json, the
CC sample with Chinese text) and, for the peer, /tmp/peers/dt (bash ../shared/bench/peers/setup.sh).
"""
from __future__ import annotations

import os
import sys

# this file is named like the stdlib module `tokenize`: keep its folder off the import path
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse  # noqa: E402
import gzip
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "shared"))
if not os.path.isdir(SHARED):
    SHARED = "/work/shared"
TOKENIZER_GZ = os.path.join(SHARED, "tokenizers", "qwen3", "tokenizer.json.gz")
CC = os.path.join(SHARED, "data", "cc-2019-30-sample.jsonl.gz")
CORPUS = "/tmp/corpus/corpus.jsonl"
PEER = os.path.join(SHARED, "bench", "peers", "dt_tokenize.py")
DT_PY = "/tmp/peers/dt/bin/python"


def prepare(work: str) -> tuple[str, str, int]:
    """4 JSONL shards (corpus + the CC sample's documents), and the uncompressed tokenizer.json."""
    inp = os.path.join(work, "in")
    tok = os.path.join(work, "tokenizer.json")
    if not os.path.exists(tok):
        with gzip.open(TOKENIZER_GZ, "rt", encoding="utf-8") as f, open(tok, "w", encoding="utf-8") as g:
            g.write(f.read())
    if not os.path.isdir(inp):
        os.makedirs(inp)
        texts = pl.read_ndjson(CORPUS)["text"].to_list()
        with gzip.open(CC, "rt", encoding="utf-8") as f:
            texts += [json.loads(line)["text"] for line in f]
        outs = [open(os.path.join(inp, f"shard-{i}.jsonl"), "w", encoding="utf-8") for i in range(4)]
        for i, t in enumerate(texts):
            outs[i % 4].write(json.dumps({"id": str(i), "text": t}, ensure_ascii=False) + "\n")
        for o in outs:
            o.close()
    nbytes = 0
    for f in sorted(os.listdir(inp)):
        nbytes += sum(len(t.encode()) for t in pl.read_ndjson(os.path.join(inp, f))["text"].to_list())
    return inp, tok, nbytes


def all_texts(inp: str) -> list[str]:
    out = []
    for f in sorted(os.listdir(inp)):
        out += pl.read_ndjson(os.path.join(inp, f))["text"].to_list()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/bench-tok")
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument("--seq-len", type=int, default=2048)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    inp, tok_json, nbytes = prepare(a.work)
    print(f"corpus: {nbytes / 1e6:.1f} MB of text in 4 shards ({inp})")

    from gristmill.tokenize.backends import load_tokenizer
    from gristmill.tokenize.packing import plan_pack
    from gristmill.tokenize.run import run_tokenize
    from gristmill.tokenize.store import TokenStore

    # raw backend throughput on the same text, one process (texts already in memory); measured before and
    # after gristmill's runs because the machine is shared
    texts = all_texts(inp)
    spec = load_tokenizer(tok_json)
    fast = spec.fast()

    def raw_run(label):
        t = time.time()
        n_tok = 0
        for i in range(0, len(texts), 1000):
            ids, _ = fast.encode_batch(texts[i:i + 1000])
            n_tok += len(ids)
        raw_s = time.time() - t
        tps = (n_tok + len(texts)) / raw_s  # + one EOS per document, as the full path counts
        print(f"raw tiktoken backend (1 process, {label}): {n_tok / 1e6:.1f}M tokens in {raw_s:.1f}s = "
              f"{tps / 1e6:.2f}M tok/s, {nbytes / raw_s / 1e6:.1f} MB/s")
        return tps

    raw_tps = [raw_run("before")]
    sub = texts[::50]
    sub_bytes = sum(len(x.encode()) for x in sub)
    ref = spec.reference()
    t = time.time()
    for i in range(0, len(sub), 1000):
        ref.encode_batch(sub[i:i + 1000])
    hf_s = time.time() - t
    print(f"raw HF tokenizers encode_batch (all cores) on a 2% sample: {sub_bytes / hf_s / 1e6:.1f} MB/s")
    del sub

    results = {}
    for npw in (1, 2):
        work = os.path.join(a.work, f"gm-work-np{npw}")
        out = os.path.join(a.work, f"gm-out-np{npw}")
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        cfg = {"tokenizer": tok_json, "sources": inp, "output": out, "format": "npy", "pack": "padded",
               "seq_len": a.seq_len}
        t = time.time()
        rep = run_tokenize(cfg, np=npw, work_dir=work, progress=False)
        s = time.time() - t
        results[npw] = (rep, s)
        print(f"gristmill tokenize+pack+write np={npw}: {rep['tokens'] / 1e6:.1f}M tokens in {s:.1f}s = "
              f"{rep['tokens'] / s / 1e6:.2f}M tok/s, {nbytes / s / 1e6:.1f} MB/s "
              f"(backend {rep['backend']}: {rep['backend_info']['reason']}; phase 1 {rep['tokenize_seconds']:.1f}s, "
              f"write {rep['write_seconds']:.1f}s)")
    raw_tps.append(raw_run("after"))
    del texts
    raw = sum(raw_tps) / len(raw_tps)
    r1, s1 = results[1]
    print(f"  full path np=1 / raw backend: {r1['tokens'] / s1 / raw:.2f}x end to end (target >= 0.9x); "
          f"phase 1 alone {r1['tokens'] / r1['tokenize_seconds'] / raw:.2f}x")
    same = open(os.path.join(a.work, "gm-out-np1", "data.npy"), "rb").read() == \
        open(os.path.join(a.work, "gm-out-np2", "data.npy"), "rb").read()
    print(f"  np=1 and np=2 outputs byte-identical: {same}")

    if not a.skip_peer and os.path.exists(DT_PY):
        out = os.path.join(a.work, "dt-out")
        t = time.time()
        subprocess.run([DT_PY, PEER, inp, "shard-*.jsonl", tok_json, out, "2"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dt_s = time.time() - t
        r2, s2 = results[2]
        print(f"datatrove DocumentTokenizer np=2: {dt_s:.1f}s = {nbytes / dt_s / 1e6:.1f} MB/s; "
              f"gristmill np=2 is {dt_s / s2:.2f}x faster (target >= 5x)")
    else:
        print("datatrove: skipped (no /tmp/peers/dt or --skip-peer)")

    # packing utilisation on the real length distribution
    tok_dir = os.path.join(a.work, "gm-work-np1", "tokenize", "tok")
    names = sorted(f[:-len(".lens.npy")] for f in os.listdir(tok_dir) if f.endswith(".lens.npy"))
    lens = np.concatenate(TokenStore(tok_dir, [names]).lens)
    print(f"packing at seq_len {a.seq_len} over {len(lens)} documents (median {int(np.median(lens))} tokens):")
    for mode in ("padded", "concat", "bfd"):
        t = time.time()
        st = plan_pack(lens, a.seq_len, mode).stats()
        print(f"  {mode:7s} rows {st['rows']:7d}  non-pad {100 * st['utilisation']:.3f}%  truncated "
              f"{st['truncated_tokens']}  docs split {st['docs_split_across_rows']}  ({time.time() - t:.2f}s)")


if __name__ == "__main__":
    sys.exit(main())
