"""Shared pieces of the Ray tests: a multi-shard input built from the bundled real sample, and a run's
artifacts (export bytes, per-op counts, rejects, removed rows, resolve outputs) for byte comparison."""
import gzip
import json
from pathlib import Path

from gm_testutil import SAMPLE

from gristmill.dataset import Dataset
from gristmill.recipe import build_ops

N_SHARDS = 6
BOILER = "Subscribe to our newsletter to get the latest stories in your inbox every week"


def make_input(root: Path) -> Path:
    """Six JSONL shards of the 179 real Common Crawl documents plus exact copies (case changed), near copies
    (a few words added), a boilerplate line shared by many documents, a ``group`` key, and records every
    reader must reject (a broken JSON line, a text that is a number)."""
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    rows = []
    for i, d in enumerate(docs):
        text = f"{d['text']}\n{BOILER}" if i % 5 == 0 else d["text"]
        rows.append({"id": d["id"], "text": text, "group": f"g{i % 7}", "n": i})
    rows += [{"id": f"copy{i}", "text": docs[i]["text"].upper(), "group": "copies", "n": i} for i in range(0, 179, 11)]
    rows += [{"id": f"near{i}", "text": docs[i]["text"] + " and a few more words here", "group": "near", "n": i}
             for i in range(3, 179, 13)]
    src = root / "in"
    src.mkdir()
    for k in range(N_SHARDS):
        with open(src / f"part-{k}.jsonl", "w", encoding="utf-8") as f:
            for j, r in enumerate(rows[k::N_SHARDS]):
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
                if j == 3:
                    f.write('{"id": "broken", "text": "no closing quote}\n')
                if j == 5 and k % 2:
                    f.write(json.dumps({"id": f"num{k}", "text": 12345, "group": "bad", "n": -1}) + "\n")
    return src


def run(src: Path, process: list, export: Path, work: Path, **kw) -> dict:
    ops = build_ops(process, allow_scripts=True)
    return Dataset.load(str(src)).process(ops).export(str(export), work_dir=str(work), **kw)


def artifacts(report: dict) -> dict:
    """Everything a run leaves for its user, as bytes (paths made relative to their run's directories)."""
    got = {"exported": [Path(p).name for p in report["exported_files"]],
           "export": [Path(p).read_bytes() for p in sorted(report["exported_files"])],
           "rows": (report["rows_read"], report["rows_out"], report["rejects"])}
    if report.get("rejects_file"):
        got["rejects.jsonl"] = Path(report["rejects_file"]).read_bytes()
    for o in report["ops"]:
        key = f"{o['position']}:{o['op']}"
        got[key] = {k: o[k] for k in ("rows_in", "rows_out", "removed", "rejected", "added", "reasons")}
        if o.get("removed_samples"):
            got[key + ":removed"] = Path(o["removed_samples"]).read_bytes()
        for p in o.get("outputs", []):
            got[f"{key}:{Path(p).name}"] = Path(p).read_bytes()
    return got


def wait_while(path) -> str:
    """A lambda expression that waits (in 50 ms steps) while ``path`` exists: ``any(...)`` of sleeps."""
    return (f"any(__import__('time').sleep(0.05) for _ in iter(lambda: __import__('os').path.exists({str(path)!r}), "
            "False))")


def wait_for(cond, what: str, timeout: float = 120):
    import time
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
