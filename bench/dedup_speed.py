"""MinHash dedup end to end at np=2: gristmill vs datatrove (4-stage) vs Data-Juicer, same input, same run.

usage: python bench/dedup_speed.py [CORPUS_JSONL] [--np 2] [--skip-peers]

The corpus (default /tmp/corpus/corpus.jsonl, built by ../shared/bench/make-corpus.sh) is split into 4
JSONL shards as the peers' README asks. gristmill runs `gristmill run RECIPE --np N` with the datatrove
preset (5-word shingles, 14 bands x 8 rows, 64-bit); datatrove runs ../shared/bench/peers/dt_minhash.py
(its defaults are the same configuration); Data-Juicer runs its document_minhash_deduplicator with the
same shingles and 14 x 8 bands (112 permutations). Each prints wall time end to end (read → dedup → JSONL
write); we print MB/s and the removed counts side by side.
"""
from __future__ import annotations

import os
import sys

# bench/ holds scripts named like stdlib modules (tokenize.py): keep it off the import path
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
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


def split(corpus: Path, out: Path, parts: int = 4) -> int:
    out.mkdir(parents=True, exist_ok=True)
    lines = corpus.read_bytes().splitlines(keepends=True)
    size = 0
    per = (len(lines) + parts - 1) // parts
    for i in range(parts):
        chunk = lines[i * per:(i + 1) * per]
        (out / f"shard-{i}.jsonl").write_bytes(b"".join(chunk))
    for ln in lines:
        size += len(json.loads(ln).get("text", "").encode())
    return size


def count_lines(path: Path) -> int:
    files = [path] if path.is_file() else sorted(path.rglob("*.jsonl"))
    return sum(sum(1 for _ in open(f, "rb")) for f in files)


def run_gristmill(inp: Path, work: Path, np_: int) -> tuple[float, int]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    recipe = work / "recipe.yaml"
    recipe.write_text(
        f"dataset_path: {inp}/shard-*.jsonl\nexport_path: {work}/kept.jsonl\nnp: {np_}\n"
        "process:\n  - document_minhash_deduplicator:\n      preset: datatrove\n")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(recipe), "--np", str(np_),
                    "--work-dir", str(work / "w"), "--no-progress"], check=True, capture_output=True)
    return time.perf_counter() - t0, count_lines(work / "kept.jsonl")


def run_datatrove(inp: Path, work: Path, np_: int) -> tuple[float, int]:
    shutil.rmtree(work, ignore_errors=True)
    t0 = time.perf_counter()
    r = subprocess.run([str(PEERS / "dt/bin/python"), str(PEER_SCRIPTS / "dt_minhash.py"), str(inp),
                        "shard-*.jsonl", str(work), str(np_)], capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("datatrove minhash")]
    if line:
        print("   ", line[-1])
    return dt, count_lines(work / "kept")


def run_dj(inp: Path, work: Path, np_: int) -> tuple[float, int]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cfg = work / "dj.yaml"
    cfg.write_text(
        f"project_name: bench-dj-minhash\ndataset_path: {inp}\nexport_path: {work}/kept.jsonl\nnp: {np_}\n"
        "use_cache: false\nopen_tracer: false\n"
        "process:\n  - document_minhash_deduplicator:\n      tokenization: space\n      window_size: 5\n"
        "      lowercase: true\n      num_permutations: 112\n      num_bands: 14\n      num_rows_per_band: 8\n")
    t0 = time.perf_counter()
    r = subprocess.run([str(PEERS / "dj/bin/dj-process"), "--config", str(cfg)], capture_output=True, text=True,
                       cwd=work)
    dt = time.perf_counter() - t0
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    return dt, count_lines(work / "kept.jsonl")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default="/tmp/corpus/corpus.jsonl")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--work", default="/tmp/gm-dedup-speed")
    a = ap.parse_args()
    work = Path(a.work)
    inp = work / "input"
    shutil.rmtree(work, ignore_errors=True)
    text_bytes = split(Path(a.corpus), inp)
    n = count_lines(inp)
    mb = text_bytes / 1e6
    print(f"input: {n} docs, {mb:.1f} MB of text, np={a.np}")
    results = {}
    results["gristmill"] = run_gristmill(inp, work / "gm", a.np)
    if not a.skip_peers:
        for name, fn in (("datatrove", run_datatrove), ("data-juicer", run_dj)):
            try:
                results[name] = fn(inp, work / name, a.np)
            except Exception as e:  # noqa: BLE001 - a broken peer venv must not hide our figure
                print(f"{name}: failed: {e}")
    print(f"{'system':<12} {'seconds':>8} {'MB/s':>7} {'kept':>7} {'removed':>8}")
    for name, (sec, kept) in results.items():
        print(f"{name:<12} {sec:8.1f} {mb / sec:7.1f} {kept:7d} {n - kept:8d}")
    peers = [v[0] for k, v in results.items() if k != "gristmill"]
    if peers:
        print(f"speed-up vs the faster peer: {min(peers) / results['gristmill'][0]:.1f}x")


if __name__ == "__main__":
    main()
