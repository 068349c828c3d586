"""What every interface (REST, web UI, MCP) asks of gristmill besides jobs: the op catalogue, recipe
validation with YAML paths, dataset previews, and applying ops to a few posted rows. Plain functions over
plain data (dicts and lists, JSON-ready), holding no logic the CLI does not share: validation is
``recipe.parse_recipe``, ops are the registry's, rows go through the same fused executor as a run."""
from __future__ import annotations

import re
from typing import Any

from ..core.defaults import TEXT_KEY

MAX_ROWS = 1000  # rows accepted by apply_ops / returned by preview
MAX_CHAIN = 20  # ops in one apply_ops call
MAX_ROWS_CHARS = 8_000_000  # characters (strings) and values (anything else) in the rows of one apply_ops call
MAX_OUTPUT_CHARS = 4 * MAX_ROWS_CHARS  # the same, in what one apply_ops call answers (rows out and removed)
MAX_YAML = 1_000_000  # characters of a recipe given as YAML text (checked before parsing)
MAX_VALUES = 200_000  # values (keys included) in one posted recipe
MAX_DEPTH = 64  # nesting of lists and mappings in one posted recipe
MAX_STORED_RECIPE = 2_000_000  # bytes of a job's recipe.yaml (its YAML once the paths are resolved)


class TooLarge(ValueError):
    """A request over one of the limits above (the REST API's 413)."""


def _events(yaml, text: str, loader):
    """The parser's events; PyYAML ≥ 6.0.4's own nesting guard (its scanner reads a flow collection ahead,
    so it stops a deep one before our count sees it) is the same refusal as ours: TooLarge."""
    try:
        yield from yaml.parse(text, Loader=loader)
    except yaml.YAMLError as e:
        if "nesting depth" in str(e):
            raise TooLarge(f"the recipe nests lists and mappings deeper than {MAX_DEPTH} levels") from None
        raise


def load_yaml(text: str):
    """A recipe's YAML text → Python data, within the limits, checked on the parser's events before any
    object is built: at most MAX_YAML characters of text (measured before parsing), and, with every alias
    (``*name``, ``<<: *name``) counted as the value it repeats, at most MAX_VALUES values, MAX_YAML
    characters of scalars and MAX_DEPTH levels: a few aliases can repeat a value millions of times, the
    expanded size is what a job would store and run. An alias inside the node it names (a cycle) is refused.
    TooLarge past a limit, ValueError for a cycle, yaml.YAMLError for bad YAML."""
    import yaml
    if not isinstance(text, str):
        raise TypeError(f"YAML text must be a string, got {type(text).__name__}")
    if len(text) > MAX_YAML:
        raise TooLarge(f"the recipe's YAML is {len(text):,} characters, over the limit of {MAX_YAML:,}")
    loader = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    # per open container: [anchor, values, characters, depth below it]; per anchor: (values, chars, depth)
    stack: list[list] = [[None, 0, 0, 0]]
    anchors: dict[str, tuple[int, int, int]] = {}
    open_anchors: set[str] = set()
    values = chars = 0
    how = ""

    def add(v: int, c: int, d: int) -> None:
        nonlocal values, chars
        values += v
        chars += c
        top = stack[-1]
        top[1] += v
        top[2] += c
        top[3] = max(top[3], d)
        if values > MAX_VALUES:
            raise TooLarge(f"the recipe holds more than {MAX_VALUES:,} values{how}")
        if chars > MAX_YAML:
            raise TooLarge(f"the recipe's values hold more than {MAX_YAML:,} characters{how}")
        if len(stack) - 1 + d > MAX_DEPTH:
            raise TooLarge(f"the recipe nests lists and mappings deeper than {MAX_DEPTH} levels")

    for ev in _events(yaml, text, loader):
        if isinstance(ev, yaml.AliasEvent):
            if ev.anchor in open_anchors:
                m = ev.start_mark
                raise ValueError(f"YAML alias *{ev.anchor} at line {m.line + 1}, column {m.column + 1} is inside "
                                 f"the node it names (a cycle)")
            if ev.anchor in anchors:  # an undefined one: the loader below says so
                how = " (aliases expanded)"
                add(*anchors[ev.anchor])
        elif isinstance(ev, yaml.ScalarEvent):
            add(1, len(ev.value), 0)
            if ev.anchor:
                anchors[ev.anchor] = (1, len(ev.value), 0)
        elif isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            add(1, 0, 1)
            stack.append([ev.anchor, 0, 0, 0])
            if ev.anchor:
                open_anchors.add(ev.anchor)
        elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, v, c, d = stack.pop()
            top = stack[-1]  # the container's own value was counted when it started
            top[1] += v
            top[2] += c
            top[3] = max(top[3], d + 1)
            if anchor:
                open_anchors.discard(anchor)
                anchors[anchor] = (v + 1, c, d + 1)
    return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader (CSafeLoader or SafeLoader)


def check_size(obj, max_values: int = MAX_VALUES, max_depth: int = MAX_DEPTH) -> None:
    """TooLarge when parsed data (a posted recipe) holds more than ``max_values`` values (keys included) or
    nests deeper than ``max_depth``; one pass without recursion."""
    stack, n = [(obj, 0)], 0
    while stack:
        x, d = stack.pop()
        n += 1
        if n > max_values:
            raise TooLarge(f"the recipe holds more than {max_values:,} values")
        if isinstance(x, (dict, list)):
            if d >= max_depth:
                raise TooLarge(f"the recipe nests lists and mappings deeper than {max_depth} levels")
            if isinstance(x, dict):
                n += len(x)
                stack.extend((v, d + 1) for v in x.values())
            else:
                stack.extend((v, d + 1) for v in x)


def _chars(obj, limit: int) -> int:
    """Characters in the strings of ``obj`` plus one per other value (a cheap measure of its memory), counted
    up to just past ``limit``."""
    stack, n = [obj], 0
    while stack and n <= limit:
        x = stack.pop()
        if isinstance(x, str):
            n += len(x) + 1
        elif isinstance(x, dict):
            n += len(x)
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            n += 1
            stack.extend(x)
        elif isinstance(x, (bytes, bytearray)):
            n += len(x) + 1
        else:
            n += 1
    return n


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
    if raw.get("allow_scripts") and not allow_scripts:
        return {"ok": False, "warnings": [], "ops": [], "errors": [
            {"path": "allow_scripts", "message": "script ops are not allowed on this server"}]}
    try:
        recipe, ops, warnings = parse_recipe(dict(raw), source="recipe")
        from ..pipeline.tokenize_step import check_section
        check_section(recipe, "recipe")
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


def preview(path: str, n: int = 5, text_key: str = TEXT_KEY, format: str | None = None, **reader_params) -> list[dict]:
    """The first ``n`` rows of a dataset (as ``gristmill head``)."""
    from ..io.head import head
    return head(path, min(n, MAX_ROWS), text_key, format, reader_params)


def apply_ops(rows: list[dict], process: list, text_key: str = TEXT_KEY, allow_scripts: bool = False) -> dict:
    """Apply a short chain (``process`` as in a recipe) to posted rows, in memory: the rows out, and per op
    rows in / out, removed rows with their reason, and rejected rows with the error. Row-local chains run
    through the fused executor directly; a chain with a global op (dedup…) runs as a small run.

    A row whose text is not a string (nor null) is a reject of the first op ("WrongFieldType", as a reader
    rejects it in a run), not an error of the call; with no ops, the top-level ``rejected``. Bounded: at most
    MAX_ROWS rows, MAX_ROWS_CHARS characters in them, MAX_OUTPUT_CHARS in the answer (TooLarge)."""
    from ..recipe import build_ops
    if len(rows) > MAX_ROWS:
        raise ValueError(f"at most {MAX_ROWS} rows per call (got {len(rows)})")
    if len(process) > MAX_CHAIN:
        raise ValueError(f"at most {MAX_CHAIN} ops per call (got {len(process)})")
    if not all(isinstance(r, dict) for r in rows):
        raise ValueError("rows must be JSON objects")
    if _chars(rows, MAX_ROWS_CHARS) > MAX_ROWS_CHARS:
        raise TooLarge(f"the rows hold more than {MAX_ROWS_CHARS:,} characters: post fewer or shorter rows")
    ops = build_ops(process, allow_scripts, "process", text_key)
    rows = [dict(r, id=r.get("id", f"row:{i}")) for i, r in enumerate(rows)]
    bad = [{"error_type": "WrongFieldType", "row": r,
            "message": f"text field {text_key!r} is {_json_type(r[text_key])}, expected a string"}
           for r in rows if r.get(text_key) is not None and not isinstance(r[text_key], str)]
    if bad:
        rows = [r for r in rows if r.get(text_key) is None or isinstance(r[text_key], str)]
    res = _apply(rows, ops, text_key)
    if bad and res["ops"]:  # the first op got them and could not take them
        first = res["ops"][0]
        first["rows_in"] += len(bad)
        first["rejected"] = bad + first["rejected"]
    elif bad:
        res["rejected"] = bad
    if _chars([res["rows"], [o.get("removed") for o in res["ops"]]], MAX_OUTPUT_CHARS) > MAX_OUTPUT_CHARS:
        raise TooLarge(f"the ops' output holds more than {MAX_OUTPUT_CHARS:,} characters: post fewer rows")
    return res


def _json_type(v) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}.get(
        type(v), type(v).__name__)


def _apply(rows: list[dict], ops: list, text_key: str) -> dict:
    from ..core import columns as C
    from ..core.accounting import REASON
    from ..core.fused import FusedOp
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

    import pyarrow as pa

    from ..engine.config import RunConfig
    from ..pipeline import Plan, process
    with tempfile.TemporaryDirectory(prefix="gm-apply-") as tmp:
        import pyarrow.parquet as pq
        pq.write_table(pa.Table.from_pylist(rows), f"{tmp}/rows.parquet")
        cfg = RunConfig(dataset_path=f"{tmp}/rows.parquet", work_dir=f"{tmp}/work", export_path=f"{tmp}/out.jsonl",
                        np=1, text_key=text_key, keep_stats_in_res_ds=True)
        report = process(Plan.of(cfg, ops))
        import json
        with open(f"{tmp}/out.jsonl", encoding="utf-8") as f:
            out_rows = [json.loads(line) for line in f]
        per_op = [{"op": r["op"], "position": r["position"], "rows_in": r["rows_in"], "rows_out": r["rows_out"],
                   "removed": [], "rejected": [], "reasons": r["reasons"]}
                  for r in report["ops"] if r["position"] is not None]
        return {"rows": out_rows, "ops": per_op}
