"""The run report: per-op counts, merged rejects and removed samples, written to ``WORK/report.json``."""
from __future__ import annotations

import json
import os
import shutil

from ..io.writers import atomic_rename, tmp_path
from ..core.accounting import OpCounts
from .config import RunConfig


def write_report(cfg: RunConfig, work: str, ops, read_counts: OpCounts, mix_counts: OpCounts,
                 counts: dict[int, OpCounts], stage_results: list[list[dict]], stages, exported: list[str],
                 seconds: float, n_shards: int, outputs: dict[int, list[str]], timings: dict | None = None) -> dict:
    """Merge the shards' side files (rejects, removed samples) in shard order and write ``report.json``:
    per op rows in / out, removed by reason, rejected, seconds. ``timings``: wall seconds of the run's
    phases (``before_engine``: planning and checks; ``engine``: the stages; ``export``)."""
    rejects_path = os.path.join(work, "rejects.jsonl")
    n_rej, reasons = _concat_rejects([r["rejects"] for res in stage_results for r in res if r["rejects"]],
                                     rejects_path)
    removed_dir = os.path.join(work, "removed")
    shutil.rmtree(removed_dir, ignore_errors=True)
    removed_files = {}
    by_op: dict[int, list[bytes]] = {}
    limit = cfg.removed_limit
    for res in stage_results:
        for r in res:
            if not r["removed"]:
                continue
            with open(r["removed"], "rb") as f:
                for line in f:
                    pos = json.loads(line)["position"]
                    lst = by_op.setdefault(pos, [])
                    if limit is None or len(lst) < limit:
                        lst.append(line)
    if by_op:
        os.makedirs(removed_dir, exist_ok=True)
    for pos, lines in sorted(by_op.items()):
        path = os.path.join(removed_dir, f"{pos:02d}-{ops[pos].name}.jsonl")
        with open(path, "wb") as f:
            f.writelines(lines)
        removed_files[pos] = path
    table = []
    if read_counts.rows_in or not ops:
        table.append({"op": "read", "position": None, **read_counts.to_dict()})
    if mix_counts.rows_in:
        table.append({"op": "mixture", "position": None, **mix_counts.to_dict()})
    internal = []  # the engine's own steps (is_internal): counted, but out of the funnels unless asked
    for op in ops:
        c = counts.get(op.position, OpCounts())
        row = {"op": op.name, "position": op.position, "kind": op.kind, **c.to_dict(),
               "removed_samples": removed_files.get(op.position),
               **({"outputs": outputs[op.position]} if op.position in outputs else {})}
        (internal if hidden(cfg, op) else table).append(row)
    final_rows = sum(r["rows_out"] for r in stage_results[-1])
    report = {
        "project_name": cfg.project_name,
        "dataset_path": cfg.dataset_path,
        "export_path": cfg.export_path,
        "exported_files": exported,
        "np": cfg.np,
        "shards": n_shards,
        "stages": [s.describe() for s in stages],
        "rows_read": read_counts.rows_out,
        "rows_rejected_on_read": read_counts.rejected,
        "rows_out": final_rows,
        "rejects": n_rej,
        "rejects_file": rejects_path if n_rej else None,
        "reject_reasons": reasons,
        "seconds": round(seconds, 3),
        **({"timings": timings} if timings else {}),
        "ops": table,
        **({"internal_ops": internal} if internal else {}),
    }
    from ..analysis.report import HTML, finish_run
    if cfg.report_kind == "run":
        report["report_html"] = os.path.join(work, HTML)
    path = os.path.join(work, "report.json")
    tmp = tmp_path(path)
    with open(tmp, "w") as f:
        json.dump(report, f, indent=2, default=str)
    atomic_rename(tmp, path)
    finish_run(cfg, work, report, [op for op in ops if not hidden(cfg, op)],
               [r.get("profile") for res in stage_results for r in res])
    return report


def is_internal(op) -> bool:
    """An engine step the user did not write (a multi-source run's ``unify_text_key``, the analysis'
    ``keep id + stats``): it declares ``internal = True``."""
    return bool(getattr(op, "internal", False))


def hidden(cfg: RunConfig, op) -> bool:
    """Whether ``op``'s row goes to report.json's ``internal_ops`` rather than ``ops`` (the table the CLI, the
    funnel of report.html and the analysis show): an internal step, unless the run asks to see them
    (``RunConfig.show_internal``)."""
    return is_internal(op) and not getattr(cfg, "show_internal", False)


def _listing(directory: str) -> list[str]:
    """Files a resolve step wrote for inspection (e.g. a deduplicator's clusters), sorted."""
    if not os.path.isdir(directory):
        return []
    return sorted(os.path.join(directory, f) for f in os.listdir(directory) if not f.endswith(".tmp"))


# Rejects a reader makes by the user's own options (content types not asked for, records over
# max_record_bytes): listed like every reject, but not errors, so they don't count toward max_reject_ratio.
POLICY_SKIPS = frozenset({"SkippedContentType", "RecordTooLarge"})


def _concat_rejects(files: list[str], out: str) -> tuple[int, list[dict]]:
    """Merge the shards' reject files into ``out``; returns the count and the reasons (op and error type,
    with a count, one example message and whether it is a policy skip), most frequent first."""
    import orjson
    n, by = 0, {}
    tmp = tmp_path(out)
    with open(tmp, "wb") as o:
        for p in files:
            with open(p, "rb") as f:
                for line in f:
                    o.write(line)
                    n += 1
                    rec = orjson.loads(line)
                    key = (rec.get("op"), rec.get("error_type"))
                    entry = by.setdefault(key, {"op": key[0], "error_type": key[1], "count": 0,
                                                "example": str(rec.get("message"))[:200],
                                                "policy_skip": key[1] in POLICY_SKIPS})
                    entry["count"] += 1
    atomic_rename(tmp, out)
    return n, sorted(by.values(), key=lambda e: -e["count"])
