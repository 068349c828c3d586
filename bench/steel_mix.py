"""The Steel-LLM preparation as one recipe (examples/steel/recipe.yaml, `sources:`) versus the separate runs
it replaces (one `gristmill run` per source, then one `gristmill tokenize` mixing their exports), on the same
generated input of ≥ 150 MB, next to the raw tokenizer's throughput on the same texts and process count.

    python bench/steel_mix.py [--mb 150] [--np 2] [--work /tmp/gm-steel-bench] [--repeat 1] [--one-only]

The input is made from the example's sample rows (examples/steel/data), each source's schema kept: every
document is a random draw of sentences from that source's samples plus a unique tag (so the dedup keeps
them), sized like Steel-LLM's mix (mostly web text). Both variants do the same work: each source's ops, an
exact dedup (across sources in the one recipe, per source in the separate runs: the separate runs cannot
dedup across sources without one more run), Qwen tokenization with <|im_end|> EOS, padded rows of 2049
tokens written as litgpt and Megatron. "tokens/s" is output tokens over the wall time of the whole
pipeline (wall and CPU seconds: the machine may be shared); "raw" is the tiktoken backend alone encoding the
exported texts in memory. Figures and what dominates them: docs/recipes.md, "Benchmark".
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(REPO, "examples", "steel")
SHARE = {"skypile": 0.40, "wanjuan": 0.18, "zhwiki": 0.10, "baike": 0.07, "baidu_qa": 0.05, "zhihu": 0.05,
         "belle": 0.04, "moss": 0.03, "firefly": 0.03, "starcoder": 0.05}
SHARD_MB = 4  # input files of ~4 MB, as datasets are often published (and see the note on line numbers below)


def _rows(name):
    out = []
    for f in sorted(os.listdir(os.path.join(EX, "data", name))):
        with open(os.path.join(EX, "data", name, f), encoding="utf-8") as fh:
            out += [json.loads(x) for x in fh if x.strip()]
    return out


def _sentences(texts):
    return [s for t in texts for s in re.split(r"(?<=[。？！.?!\n])", t) if s.strip()]


def make_row(name, rng, pool, i):
    tag = f"（{name}-{i}）"

    def text(k1, k2):
        return "".join(rng.choice(pool) for _ in range(rng.randint(k1, k2))) + tag
    if name in ("skypile",):
        return {"text": text(8, 40)}
    if name == "wanjuan":
        return {"id": f"wj-{i}", "title": text(1, 1), "content": text(8, 40), "language": "zh"}
    if name == "zhwiki":
        return {"completion": text(6, 30), "source": "wikipedia.zh2307"}
    if name == "baike":
        return {"title": text(1, 1), "summary": text(1, 3),
                "sections": [{"title": text(1, 1), "content": text(2, 8)} for _ in range(rng.randint(1, 6))]}
    if name == "baidu_qa":
        return {"qid": f"qa-{i}", "category": "生活", "title": text(1, 1), "desc": text(0, 2), "answer": text(2, 10)}
    if name == "zhihu":
        meta = {"question_id": i, "upvotes": rng.choice(["1.5万", "36", "2.3k", "120", "8", "3.2万"])}
        return {"INSTRUCTION": text(1, 2), "RESPONSE": text(3, 15), "SOURCE": "Zhihu",
                "METADATA": json.dumps(meta, ensure_ascii=False)}
    if name == "belle":
        return {"instruction": text(1, 2), "input": text(0, 1) if rng.random() < 0.5 else "", "output": text(2, 10)}
    if name == "moss":
        return {"conversation_id": i, "conversation": [{"human": text(1, 2), "assistant": text(2, 8)}
                                                       for _ in range(rng.randint(1, 4))]}
    if name == "firefly":
        return {"kind": "QA", "input": text(1, 3), "target": text(1, 6)}
    if name == "starcoder":
        body = "".join(rng.choice(pool) for _ in range(rng.randint(5, 40)))
        return {"content": f"# {name}-{i}\n" + body, "max_stars_repo_name": "x/y"}
    raise KeyError(name)


def generate(data: str, mb: float, seed: int = 0) -> dict:
    """Write the input: per source, JSONL shards of ~SHARD_MB; returns {source: bytes}."""
    sizes = {}
    for name, share in SHARE.items():
        rows = _rows(name)
        if name == "starcoder":
            pool = [line + "\n" for r in rows for line in r["content"].splitlines()]
        else:
            pool = _sentences(s for r in rows for s in _strings(r) if len(s) > 8 and not s.startswith("{"))
        rng = random.Random(f"{seed}-{name}")
        target = int(mb * share * 1e6)
        d = os.path.join(data, name)
        os.makedirs(d, exist_ok=True)
        written, part, i = 0, 0, 0
        f = None
        while written < target:
            if f is None or f.tell() > SHARD_MB * 1e6:
                if f is not None:
                    f.close()
                f = open(os.path.join(d, f"part-{part:03d}.jsonl"), "w", encoding="utf-8")
                part += 1
            line = json.dumps(make_row(name, rng, pool, i), ensure_ascii=False) + "\n"
            f.write(line)
            written += len(line.encode())
            i += 1
        f.close()
        sizes[name] = written
    return sizes


def _strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for x in v.values():
            yield from _strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)


CPU = {"s": 0.0}  # CPU seconds (user + sys) of every gristmill process and its workers, summed by the runs


def _gm(*args):
    """Wall seconds of one gristmill command; its CPU seconds (with its workers') are added to CPU["s"]:
    on a shared machine the wall time moves with the other users' load, the CPU time much less."""
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", *args, "--no-progress"], capture_output=True,
                         text=True, cwd=REPO)
    if res.returncode != 0:
        sys.exit(f"gristmill {' '.join(args)} failed:\n{res.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU["s"] += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.perf_counter() - t0


def one_recipe(base: dict, data: str, out: str, np_: int) -> tuple[float, dict]:
    r = json.loads(json.dumps(base))
    r.update(np=np_, work_dir=os.path.join(out, "work"), export_path=os.path.join(out, "steel.jsonl"))
    for s in r["sources"]:
        s["path"] = os.path.join(data, s["name"])
    r["tokenize"].update(output=os.path.join(out, "tokens"), seq_len=2048, rows_per_chunk=1024)
    path = os.path.join(out, "recipe.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(r, f, allow_unicode=True, sort_keys=False)
    secs = _gm("run", path)
    with open(os.path.join(out, "tokens", "report.json")) as f:
        return secs, json.load(f)


def separate_runs(base: dict, data: str, out: str, np_: int) -> tuple[float, list[float], dict]:
    """One `run` per source (its ops + a dedup, exporting JSONL), then one `tokenize` over the exports."""
    times, sources = [], []
    for s in base["sources"]:
        name = s["name"]
        key = s.get("text_keys", "text")
        r = {"project_name": name, "np": np_, "dataset_path": os.path.join(data, name), "text_keys": key,
             "work_dir": os.path.join(out, "work", name), "export_path": os.path.join(out, "exports", f"{name}.jsonl"),
             "process": list(s.get("process", [])) + [{"document_deduplicator": {}}]}
        path = os.path.join(out, f"{name}.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(r, f, allow_unicode=True, sort_keys=False)
        times.append(_gm("run", path))
        sources.append({"name": name, "path": r["export_path"], "text_key": key})
    tok = dict(base["tokenize"], sources=sources, output=os.path.join(out, "tokens"), seq_len=2048,
               rows_per_chunk=1024)
    path = os.path.join(out, "tokenize.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(tok, f, allow_unicode=True, sort_keys=False)
    times.append(_gm("tokenize", path, "--np", str(np_), "--work-dir", os.path.join(out, "work", "tokenize")))
    with open(os.path.join(out, "tokens", "report.json")) as f:
        return sum(times), times, json.load(f)


def _raw_worker(path, part, parts, barrier, q):
    from gristmill.tokenize.backends import load_tokenizer
    with open(path, encoding="utf-8") as f:
        texts = [json.loads(x)["text"] for k, x in enumerate(f) if k % parts == part]
    fast = load_tokenizer("qwen.tiktoken").fast()
    eos = load_tokenizer("qwen.tiktoken").token_id("<|im_end|>")
    barrier.wait()
    c = time.process_time()
    n = 0
    for i in range(0, len(texts), 1000):
        ids, _ = fast.encode_batch(texts[i:i + 1000], None, eos)
        n += len(ids)
    q.put((n, time.perf_counter(), time.process_time() - c))


def raw_tokenizer(export: str, nproc: int) -> tuple[int, float, float]:
    """(tokens, seconds, CPU seconds): the fast backend alone on the exported texts, in memory, ``nproc``
    processes."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    barrier, q = ctx.Barrier(nproc + 1), ctx.Queue()
    procs = [ctx.Process(target=_raw_worker, args=(export, i, nproc, barrier, q)) for i in range(nproc)]
    for p in procs:
        p.start()
    barrier.wait()
    t0 = time.perf_counter()
    got = [q.get() for _ in procs]
    for p in procs:
        p.join()
    return sum(g[0] for g in got), max(g[1] for g in got) - t0, sum(g[2] for g in got)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=150)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--work", default="/tmp/gm-steel-bench")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each variant (alternating); best is reported")
    ap.add_argument("--one-only", action="store_true", help="only the one recipe (and the raw tokenizer), not the "
                    "separate runs")
    a = ap.parse_args()
    data = os.path.join(a.work, "data")
    if not os.path.isdir(data):
        t0 = time.perf_counter()
        sizes = generate(data, a.mb)
        print(f"generated {sum(sizes.values()) / 1e6:.1f} MB in {time.perf_counter() - t0:.1f}s: "
              + ", ".join(f"{k} {v / 1e6:.1f}" for k, v in sizes.items()))
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(data) for f in fs)
    with open(os.path.join(EX, "recipe.yaml")) as f:
        base = yaml.safe_load(f)
    one, sep = [], []
    for k in range(a.repeat):
        for variant in ("one",) if a.one_only else ("one", "separate"):
            out = os.path.join(a.work, f"{variant}-{k}")
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            CPU["s"] = 0.0
            if variant == "one":
                secs, rep = one_recipe(base, data, out, a.np)
                one.append((secs, rep, CPU["s"]))
            else:
                secs, parts, rep = separate_runs(base, data, out, a.np)
                sep.append((secs, parts, rep, CPU["s"]))
    s1, r1, c1 = min(one, key=lambda x: x[0])
    raws = [raw_tokenizer(os.path.join(a.work, "one-0", "steel.jsonl"), a.np) for _ in range(max(2, a.repeat))]
    raw_n, raw_s, raw_c = max(raws, key=lambda x: x[0] / x[1])
    t1 = r1["tokens"]
    print(f"input {total / 1e6:.1f} MB, np={a.np}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"one recipe (sources:):  {s1:7.1f} s wall, {c1:7.1f} s CPU  {r1['docs']:,} docs  {t1:,} tokens  "
          f"{t1 / s1 / 1e6:.3f}M tok/s  (runs: {', '.join(f'{x[0]:.1f}' for x in one)}; of the best: tokenize step "
          f"{r1['seconds']:.1f} s, its phase 1 {r1['tokenize_seconds']:.1f} s)")
    if sep:
        s2, parts, r2, c2 = min(sep, key=lambda x: x[0])
        t2 = r2["tokens"]
        print(f"separate runs (sum of {len(parts)}): {s2:7.1f} s wall, {c2:7.1f} s CPU  {r2['docs']:,} docs  {t2:,} "
              f"tokens  {t2 / s2 / 1e6:.3f}M tok/s  (runs: {', '.join(f'{x:.1f}' for x in parts)})")
        print(f"one recipe vs separate: {s2 / s1:.2f}x the speed by wall time, {c2 / c1:.2f}x by CPU time "
              f"(target >= 1.0x)")
    print(f"raw tokenizer (tiktoken backend, texts in memory, np={a.np}): {raw_n / raw_s / 1e6:.2f}M tok/s, "
          f"{raw_c:.1f} CPU s (best of {len(raws)}: {', '.join(f'{n / s / 1e6:.2f}' for n, s, _ in raws)}); one "
          f"recipe end to end is {t1 / s1 / (raw_n / raw_s):.2f}x raw by wall (target >= 0.5x), "
          f"{raw_c / c1:.2f}x by CPU")


if __name__ == "__main__":
    main()
