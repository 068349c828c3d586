"""What every interface (REST, web UI, MCP) asks of gristmill besides jobs: the op catalogue, recipe
validation with YAML paths, dataset previews, and applying ops to a few posted rows. Plain functions over
plain data (dicts and lists, JSON-ready), holding no logic the CLI does not share: validation is
``recipe.parse_recipe``, ops are the registry's, rows go through the same fused executor as a run."""
from __future__ import annotations

import re
from typing import Any

MAX_ROWS = 1000  # rows accepted by apply_ops / returned by preview
MAX_CHAIN = 20  # ops in one apply_ops call


def list_ops(query: str | None = None, kind: str | None = None) -> list[dict]:
    """Every op (name, kind, one-line summary, params), optionally filtered by a substring of the name or
    doc and by kind."""
    from ..registry import all_ops, describe
    out = []
    for name, cls in all_ops().items():
        d = describe(cls)
        if kind and d["kind"] != kind:
            continue
        if query and query.lower() not in (name + " " + d["doc"]).lower():
            continue
        out.append({"name": name, "kind": d["kind"], "summary": d["doc"].split("\n\n")[0].replace("\n", " "),
                    "params": d["params"]})
    return out


def describe_op(name: str) -> dict:
    """An op's kind, doc, params and JSON schema; KeyError naming the closest op."""
    from ..core.names import closest
    from ..registry import all_ops, describe
    ops = all_ops()
    if name not in ops:
        raise KeyError(f"unknown op {name!r}{closest(name, ops)}")
    return describe(ops[name])


def list_formats() -> list[dict]:
    from ..io.base import readers
    return [{"name": r.name, "extensions": list(r.extensions), "options": dict(r.options)}
            for r in sorted(readers().values(), key=lambda r: r.name)]


_LOC = re.compile(r"^(?P<src>recipe): (?P<path>[^: ]+): (?P<msg>.*)$")
_KEY = re.compile(r"unknown key '([^']+)'")


def validate_recipe(raw: Any, allow_scripts: bool = False) -> dict:
    """``{"ok": bool, "errors": [{"path", "message"}], "warnings": [...], "ops": [...]}`` for a recipe given
    as a mapping (parsed YAML), with the CLI's messages; the path is the YAML path of the problem
    (``process[2].words_num_filter.min_nm``) when the message names one."""
    from ..recipe import RecipeError, parse_recipe
    if not isinstance(raw, dict):
        return {"ok": False, "errors": [{"path": "", "message": "a recipe is a mapping of settings"}],
                "warnings": [], "ops": []}
    if raw.get("sources") is not None or raw.get("dataset") is not None:
        # the job manager checks dataset_path against the server's allowed roots, not yet these inputs
        key = "sources" if raw.get("sources") is not None else "dataset"
        return {"ok": False, "warnings": [], "ops": [], "errors": [
            {"path": key, "message": f"recipes with `{key}:` are not run by the server yet (its paths are not "
                                     f"checked against the allowed roots); run them with `gristmill run`"}]}
    if raw.get("allow_scripts") and not allow_scripts:
        return {"ok": False, "warnings": [], "ops": [], "errors": [
            {"path": "allow_scripts", "message": "script ops are not allowed on this server"}]}
    try:
        recipe, ops, warnings = parse_recipe(dict(raw), source="recipe")
        from ..cli import check_tokenize_section
        check_tokenize_section(recipe, "recipe")
    except (RecipeError, ValueError, FileNotFoundError) as e:
        errors = []
        for part in re.split(r"\n|; (?=recipe: )", str(e)):
            part = part.strip()
            m = _LOC.match(part)
            if m:
                errors.append({"path": m["path"], "message": m["msg"]})
                continue
            k = _KEY.search(part)
            errors.append({"path": k[1] if k else "", "message": part.removeprefix("recipe: ")})
        return {"ok": False, "errors": errors, "warnings": [], "ops": []}
    if any(getattr(o, "name", "").startswith("python_") for o in ops) and not allow_scripts:
        return {"ok": False, "warnings": warnings, "ops": [], "errors": [
            {"path": "process", "message": "script ops are not allowed on this server"}]}
    return {"ok": True, "errors": [], "warnings": warnings,
            "ops": [{"name": o.name, "kind": o.kind, "position": i} for i, o in enumerate(ops)]}


def preview(path: str, n: int = 5, text_key: str = "text", format: str | None = None, **reader_params) -> list[dict]:
    """The first ``n`` rows of a dataset (as ``gristmill head``)."""
    from ..dataset import Dataset
    return Dataset.load(path, text_key=text_key, format=format, **reader_params).head(min(n, MAX_ROWS))


def apply_ops(rows: list[dict], process: list, text_key: str = "text", allow_scripts: bool = False) -> dict:
    """Apply a short chain (``process`` as in a recipe) to posted rows, in memory: the rows out, and per op
    rows in / out, removed rows with their reason, and rejected rows with the error. Row-local chains run
    through the fused executor directly; a chain with a global op (dedup…) runs as a small run."""
    from ..core import columns as C
    from ..core.accounting import REASON
    from ..core.fused import FusedOp
    from ..recipe import build_ops
    if len(rows) > MAX_ROWS:
        raise ValueError(f"at most {MAX_ROWS} rows per call (got {len(rows)})")
    if len(process) > MAX_CHAIN:
        raise ValueError(f"at most {MAX_CHAIN} ops per call (got {len(process)})")
    if not all(isinstance(r, dict) for r in rows):
        raise ValueError("rows must be JSON objects")
    ops = build_ops(process, allow_scripts, "process")
    for i, op in enumerate(ops):
        op.position = i
        op.bind_text_key(text_key)
    rows = [dict(r, id=r.get("id", f"row:{i}")) for i, r in enumerate(rows)]
    if not rows:
        return {"rows": [], "ops": [{"op": o.name, "position": o.position, "rows_in": 0, "rows_out": 0,
                                     "removed": [], "rejected": []} for o in ops]}
    if all(o.row_local for o in ops):
        res = FusedOp(ops).run_batch(C.from_records(rows, strings=(text_key,)))
        out_rows = C.drop_private(res.batch, keep_stats=True).to_pylist()
        per_op = []
        for op, c, gone in zip(ops, res.counts, res.removed):
            removed = []
            if gone is not None:
                for r in C.drop_private(gone, keep_stats=True).to_pylist():
                    removed.append({"reason": r.pop(REASON, None), "row": r})
            per_op.append({"op": op.name, "position": op.position, "rows_in": c.rows_in, "rows_out": c.rows_out,
                           "removed": removed,
                           "rejected": [{"error_type": j.error_type, "message": j.message, "row": j.row}
                                        for j in res.rejects if j.position == op.position]})
        return {"rows": out_rows, "ops": per_op}
    import tempfile

    from ..dataset import Dataset
    with tempfile.TemporaryDirectory(prefix="gm-apply-") as tmp:
        ds = Dataset.from_list(rows, text_key=text_key).process(ops)
        report = ds.export(f"{tmp}/out.jsonl", work_dir=f"{tmp}/work", keep_stats_in_res_ds=True)
        import json
        with open(f"{tmp}/out.jsonl", encoding="utf-8") as f:
            out_rows = [json.loads(line) for line in f]
        per_op = [{"op": r["op"], "position": r["position"], "rows_in": r["rows_in"], "rows_out": r["rows_out"],
                   "removed": [], "rejected": [], "reasons": r["reasons"]}
                  for r in report["ops"] if r["position"] is not None]
        return {"rows": out_rows, "ops": per_op}
