"""Core runtime benchmark (issue 2): identity and 3-op recipes vs the raw read+write limit, np=1 and 2,
and peak RSS for 1× vs 5× the input.

usage: python bench/core_throughput.py [CORPUS_JSONL] [--skip-rss]
(CORPUS defaults to /tmp/corpus/corpus.jsonl, built by ../shared/bench/make-corpus.sh /tmp/corpus small)

The raw limit is pyarrow reading the same JSONL (read_json, all cores) and writing it back as JSONL
(polars write_ndjson; pyarrow has no JSON writer), measured in the same run.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))


def raw_limit(path: str) -> tuple[float, float, int]:
    import polars as pl
    import pyarrow.json as pj
    size = os.path.getsize(path)
    t0 = time.perf_counter()
    table = pj.read_json(path, read_options=pj.ReadOptions(block_size=64 << 20))
    t1 = time.perf_counter()
    with open(os.devnull, "wb") as out:
        df = pl.from_arrow(table)
        out.write(df.write_ndjson().encode())
    t2 = time.perf_counter()
    return size / (t1 - t0) / 1e6, size / (t2 - t0) / 1e6, table.num_rows


def _rss_of_tree(root_pid: int) -> int:
    """Total RSS (bytes) of a process and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            ppid, pages = int(parts[1]), int(parts[21])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
        rss[int(d)] = pages * os.sysconf("SC_PAGE_SIZE")
    total, stack = 0, [root_pid]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        stack.extend(children.get(p, []))
    return total


def run_recipe(data: str, process: list, np_: int, tmp: str, name: str) -> tuple[float, int, dict]:
    out = os.path.join(tmp, f"{name}.jsonl")
    work = os.path.join(tmp, f"work-{name}")
    shutil.rmtree(work, ignore_errors=True)
    recipe = {"project_name": name, "dataset_path": data, "export_path": out, "work_dir": work, "np": np_,
              "process": process}
    rpath = os.path.join(tmp, f"{name}.yaml")
    with open(rpath, "w") as f:
        yaml.safe_dump(recipe, f)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gristmill.cli", "run", rpath, "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]

    def watch():
        while proc.poll() is None:
            peak[0] = max(peak[0], _rss_of_tree(proc.pid))
            time.sleep(0.05)
    th = threading.Thread(target=watch, daemon=True)
    th.start()
    _, err = proc.communicate()
    th.join()
    dt = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{name} failed:\n{err.decode()[-3000:]}")
    import json
    with open(os.path.join(work, "report.json")) as f:
        report = json.load(f)
    os.remove(out)
    return dt, peak[0], report


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    data = args[0] if args else "/tmp/corpus/corpus.jsonl"
    if not os.path.exists(data):
        raise SystemExit(f"{data} not found: build it with ../shared/bench/make-corpus.sh /tmp/corpus small")
    size = os.path.getsize(data)
    tmp = tempfile.mkdtemp(prefix="gm-bench-")
    print(f"corpus: {data} ({size / 1e6:.0f} MB)")
    read_mbs, rw_mbs, rows = raw_limit(data)
    print(f"raw limit (pyarrow read_json + polars write_ndjson): read {read_mbs:.0f} MB/s, "
          f"read+write {rw_mbs:.0f} MB/s, {rows:,} rows")
    from gristmill.registry import all_ops
    three = [{"replace_content_mapper": {"pattern": r"https?://\S+", "repl": ""}},
             {"words_num_filter": {"min_num": 10}}]
    if "document_deduplicator" in all_ops():
        three.append({"document_deduplicator": {"lowercase": True}})
    recipes = {"identity": [], "3-op": three}
    print(f"{'recipe':10} {'np':>3} {'seconds':>8} {'MB/s':>7} {'rows/s':>9} {'vs raw r+w':>10} {'peak RSS':>9}")
    for name, process in recipes.items():
        for np_ in (1, 2):
            dt, peak, report = run_recipe(data, process, np_, tmp, f"{name}-np{np_}")
            print(f"{name:10} {np_:>3} {dt:8.1f} {size / dt / 1e6:7.1f} {report['rows_read'] / dt:9,.0f} "
                  f"{size / dt / 1e6 / rw_mbs:10.0%} {peak / 2**20:8.0f}M")
    if "--skip-rss" not in sys.argv:
        big = os.path.join(tmp, "x5.jsonl")
        with open(big, "wb") as out:
            for _ in range(5):
                with open(data, "rb") as f:
                    shutil.copyfileobj(f, out, 16 << 20)
        _, peak1, _ = run_recipe(data, three, 2, tmp, "rss-1x")
        _, peak5, _ = run_recipe(big, three, 2, tmp, "rss-5x")
        print(f"peak RSS 3-op np=2: 1x {peak1 / 2**20:.0f} MB, 5x {peak5 / 2**20:.0f} MB, ratio {peak5 / peak1:.2f}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
