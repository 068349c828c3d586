"""MinHash dedup end to end at np=2: gristmill vs datatrove (4-stage) vs Data-Juicer, same input, same run.

usage: python bench/dedup_speed.py [CORPUS_JSONL] [--np 2] [--limit ROWS] [--skip-peers] [--repeat N]

The corpus (default /tmp/corpus/corpus.jsonl, built by ../shared/bench/make-corpus.sh) is split into 4
JSONL shards as the peers' README asks. gristmill runs `gristmill run RECIPE --np N` with the datatrove
preset (5-word shingles, 14 bands x 8 rows, 64-bit); datatrove runs ../shared/bench/peers/dt_minhash.py
(its defaults are the same configuration); Data-Juicer runs its document_minhash_deduplicator with the
same shingles and 14 x 8 bands (112 permutations). Each prints wall time end to end (read → dedup → JSONL
write); we print MB/s and the removed counts side by side. ``--repeat N`` runs every system N times, the
systems interleaved round by round, and compares the fastest run of each (a peer's later runs are warm: its
imports, bytecode and caches in place, as the issue's "Data-Juicer with a warm cache").
"""
from __future__ import annotations

import os
import sys

# bench/ holds scripts named like stdlib modules (tokenize.py): keep it off the import path
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PEERS = Path(os.environ.get("PEERS_DIR", "/tmp/peers"))
PEER_SCRIPTS = REPO.parent / "shared" / "bench" / "peers"
if not PEER_SCRIPTS.exists():
    PEER_SCRIPTS = Path("/work/shared/bench/peers")


def split(corpus: Path, out: Path, limit: int | None, parts: int = 4) -> int:
    """Write the first ``limit`` rows (all when None) as ``parts`` JSONL shards; returns bytes of text."""
    out.mkdir(parents=True, exist_ok=True)
    with open(corpus, "rb") as f:
        lines = list(itertools.islice(f, limit))
    per = (len(lines) + parts - 1) // parts
    for i in range(parts):
        (out / f"shard-{i}.jsonl").write_bytes(b"".join(lines[i * per:(i + 1) * per]))
    return sum(len(json.loads(ln).get("text", "").encode()) for ln in lines)


def count_lines(path: Path) -> int:
    files = [path] if path.is_file() else sorted(path.rglob("*.jsonl"))
    return sum(sum(1 for _ in open(f, "rb")) for f in files)


def timed(cmd: list[str], work: Path, kept: str, config: tuple[str, str] | None = None,
          env: dict | None = None) -> tuple[float, int, str]:
    """Run one system end to end in a fresh ``work`` dir (writing ``config`` = (file name, text) there
    first); (seconds, rows in ``work/kept``, stdout)."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if config:
        (work / config[0]).write_text(config[1])
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=env)
    sec = time.perf_counter() - t0
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    return sec, count_lines(work / kept), r.stdout


def run_gristmill(inp: Path, work: Path, np_: int) -> tuple[float, int]:
    recipe = (f"dataset_path: {inp}/shard-*.jsonl\nexport_path: {work}/kept.jsonl\nnp: {np_}\n"
              "process:\n  - document_minhash_deduplicator:\n      preset: datatrove\n")
    sec, kept, _ = timed([sys.executable, "-m", "gristmill.cli", "run", str(work / "recipe.yaml"), "--np", str(np_),
                          "--work-dir", str(work / "w"), "--no-progress"], work, "kept.jsonl",
                         ("recipe.yaml", recipe),
                         {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])})
    return sec, kept


def run_datatrove(inp: Path, work: Path, np_: int) -> tuple[float, int]:
    # the script clears and fills OUT_DIR itself; its stage timings are echoed
    sec, kept, out = timed([str(PEERS / "dt/bin/python"), str(PEER_SCRIPTS / "dt_minhash.py"), str(inp),
                            "shard-*.jsonl", str(work / "dt"), str(np_)], work, "dt/kept")
    for line in out.splitlines():
        if line.startswith("datatrove minhash"):
            print("   ", line)
    return sec, kept


def run_dj(inp: Path, work: Path, np_: int) -> tuple[float, int]:
    cfg = (f"project_name: bench-dj-minhash\ndataset_path: {inp}\nexport_path: {work}/kept.jsonl\nnp: {np_}\n"
           "use_cache: false\nopen_tracer: false\n"
           "process:\n  - document_minhash_deduplicator:\n      tokenization: space\n      window_size: 5\n"
           "      lowercase: true\n      num_permutations: 112\n      num_bands: 14\n      num_rows_per_band: 8\n")
    sec, kept, _ = timed([str(PEERS / "dj/bin/dj-process"), "--config", str(work / "dj.yaml")], work, "kept.jsonl",
                         ("dj.yaml", cfg))
    return sec, kept


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default="/tmp/corpus/corpus.jsonl")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="only the first N rows of the corpus (a slice)")
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--work", default="/tmp/gm-dedup-speed")
    ap.add_argument("--repeat", type=int, default=1, help="runs per system, interleaved; the fastest is compared")
    a = ap.parse_args()
    work = Path(a.work)
    inp = work / "input"
    shutil.rmtree(work, ignore_errors=True)
    mb = split(Path(a.corpus), inp, a.limit) / 1e6
    n = count_lines(inp)
    print(f"input: {n} docs, {mb:.1f} MB of text, np={a.np}")
    systems = [("gristmill", run_gristmill)]
    if not a.skip_peers:
        systems += [("datatrove", run_datatrove), ("data-juicer", run_dj)]
    runs: dict[str, list[tuple[float, int]]] = {}
    failed = set()
    for i in range(a.repeat):
        for name, fn in systems if i % 2 == 0 else systems[::-1]:
            if name in failed:
                continue
            try:
                runs.setdefault(name, []).append(fn(inp, work / name, a.np))
                print(f"  round {i + 1} {name}: {runs[name][-1][0]:.2f} s", flush=True)
            except Exception as e:  # noqa: BLE001 - a broken peer venv must not hide the other figures
                print(f"{name}: failed: {e}")
                failed.add(name)
    results = {k: min(v) for k, v in runs.items()}
    print(f"{'system':<12} {'seconds':>8} {'median':>7} {'MB/s':>7} {'kept':>7} {'removed':>8}")
    for name, (sec, kept) in results.items():
        med = sorted(r[0] for r in runs[name])[(len(runs[name]) - 1) // 2]
        print(f"{name:<12} {sec:8.2f} {med:7.2f} {mb / sec:7.1f} {kept:7d} {n - kept:8d}")
    peers = [v[0] for k, v in results.items() if k != "gristmill"]
    if peers and "gristmill" in results:
        print(f"speed-up vs the faster peer: {min(peers) / results['gristmill'][0]:.1f}x")


if __name__ == "__main__":
    main()
