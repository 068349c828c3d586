"""`gristmill mcp`: gristmill as an MCP server, so that an agent can browse the op catalogue, validate and
try recipes on a few rows, run recipes and analyses as background jobs, and read their reports.

Transports: stdio (default; what desktop/CLI agents spawn) and streamable HTTP
(``--transport http --host 127.0.0.1 --port N``, endpoint ``/mcp``). Built on the official ``mcp`` SDK:
2.x ``MCPServer``, or 1.x ``FastMCP``, the same API under its old name (tested with 1.10, 1.30 and 2.3).

Thin by design: the catalogue, validation, previews and ``apply_ops`` are ``service.core``'s functions, jobs
are ``service.jobs.JobManager``'s (the same as the REST API's), the gallery is ``service.gallery``.

Errors are data. Every tool answers a JSON object with ``"ok"``. When a call cannot do what it was asked
(unknown op or job, a path outside the data roots, a recipe that does not validate given to ``run_recipe``)
the answer is ``{"ok": false, "errors": [{"path", "message"}]}`` flagged as a tool error (``isError: true``),
with the same messages as the CLI (YAML path of the problem, "did you mean …"), never a traceback.
``validate_recipe`` is the exception: an invalid recipe is a successful answer (``isError: false``,
``"ok": false`` and the errors), since telling what is wrong is that tool's job.

Paths (a recipe's ``dataset_path`` and ``export_path``, ``preview_data``'s and ``analyze_dataset``'s path) must
lie under a data root (``--data-root``, repeatable; default the working directory) or the server's job
directories; relative paths are relative to the first root (service.paths, shared with the REST API). Jobs
keep their state, logs and work dirs in ``--state-dir`` (a recipe's own ``work_dir`` is replaced by the
job's); ``--max-concurrent`` jobs run at once; script ops need ``--allow-scripts``. When the server stops,
the jobs it started are interrupted (resumable with ``resume_job``)."""
from __future__ import annotations

import os
from typing import Any  # tool signatures are evaluated by the SDK in this module's globals

from ..core.defaults import TEXT_KEY


def located(message: str, default: str = "") -> dict:
    from .jobs import located as _located  # jobs (sqlite, subprocess) loads only when the server runs
    return _located(message, default)

DEFAULT_PORT = 8765
MAX_TEXT = 2000  # characters of each string field shown by preview_data (the rest is cut, with a marker)
MAX_WAIT = 60.0  # seconds job_status may block waiting for a job


def add_arguments(p) -> None:
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                   help="stdio (default: for clients that spawn the server) or streamable HTTP (endpoint /mcp)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind with --transport http (default 127.0.0.1; "
                                                      "anything but loopback requires --token)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"port with --transport http (default {DEFAULT_PORT}; 0: any free port)")
    p.add_argument("--token", default=None,
                   help="with --transport http: require 'Authorization: Bearer TOKEN' on every request "
                        "(default: $GRISTMILL_TOKEN)")
    p.add_argument("--data-root", action="append", default=None, metavar="DIR",
                   help="directory the server may read and write (repeatable; default: the working directory); "
                        "relative paths are relative to the first one, paths outside every root are refused")
    p.add_argument("--state-dir", default=".gristmill-mcp", help="where jobs keep their state, logs and work dirs "
                                                                 "(default ./.gristmill-mcp)")
    from .server import add_trust_arguments
    add_trust_arguments(p)
    p.add_argument("--max-concurrent", type=int, default=1, help="jobs running at once (default 1; more wait queued)")


# ---------------------------------------------------------------------------------------------------- helpers


class ToolFailure(Exception):
    """A tool's refusal: ``errors`` is a list of ``{"path", "message"}``."""

    def __init__(self, errors: list[dict]):
        super().__init__("; ".join(e["message"] for e in errors))
        self.errors = errors


def _fail(message: str, path: str = "") -> ToolFailure:
    return ToolFailure([{"path": path, "message": message}])




def _parse_yaml(text: str) -> dict:
    """A recipe's YAML text → mapping, or a ToolFailure with the line and column of the syntax error; within
    the REST API's limits (service.core.load_yaml: its length measured before parsing, values, characters
    and nesting counted with aliases expanded before objects are built)."""
    import yaml

    from .core import load_yaml
    try:
        raw = load_yaml(text)
    except (ValueError, TypeError) as e:  # over a limit, a cyclic alias
        raise _fail(str(e)) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise _fail(f"not valid YAML{where}: {problem}") from None
    if not isinstance(raw, dict):
        raise _fail("a recipe is a mapping of settings (dataset_path, export_path, process, …)")
    return raw


def _shorten(value, limit: int):
    """Strings cut to ``limit`` characters (recursively in lists and dicts), marking how much was cut."""
    if isinstance(value, str) and limit and len(value) > limit:
        return value[:limit] + f"… [{len(value) - limit} more characters]"
    if isinstance(value, dict):
        return {k: _shorten(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v, limit) for v in value]
    return value


def _jsonable(value):
    """Rows as JSON: bytes as base64 text, anything else unknown as its str()."""
    import base64
    import datetime
    import decimal
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (datetime.date, datetime.datetime, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return str(value)


def _compact_params(params: list[dict]) -> list[str]:
    out = []
    for p in params:
        s = f"{p['name']}: {p['type']}"
        if not p.get("required"):
            s += f" = {p['default']!r}"
        out.append(s)
    return out


def _top(reasons: dict | None, n: int = 5) -> list:
    return [[r, c] for r, c in sorted((reasons or {}).items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def _read_json(path: str | None):
    import json
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def report_summary(job: dict, report: dict | None, model: dict | None) -> dict:
    """A compact summary of a job's report (``report.json``) and report model (``report_model.json``): rows
    read / out, per-op counts with the top removal reasons, rejects, exported files, and for an analysis the
    overall table, what-if rows and k-sigma suggestions."""
    out: dict = {"job_id": job.get("id"), "kind": job.get("kind"), "state": job.get("state")}
    if report:
        out.update({k: report.get(k) for k in ("project_name", "dataset_path", "export_path", "rows_read", "rows_out",
                                               "seconds", "np", "shards") if k in report})
        out["rejects"] = {"count": report.get("rejects", 0), "file": report.get("rejects_file"),
                          "reasons": (report.get("reject_reasons") or [])[:5]}
        ops = []
        for r in report.get("ops") or []:
            row = {"op": r.get("op"), "position": r.get("position"), "rows_in": r.get("rows_in"),
                   "rows_out": r.get("rows_out"), "removed": r.get("removed"), "rejected": r.get("rejected"),
                   "seconds": r.get("seconds")}
            if r.get("added"):
                row["added"] = r["added"]
            if r.get("file_errors"):
                row["file_errors"] = r["file_errors"]
            if r.get("reasons"):
                row["top_reasons"] = _top(r["reasons"])
            if r.get("removed_samples"):
                row["removed_file"] = r["removed_samples"]  # removed rows with their reason: preview_data reads it
            ops.append(row)
        out["ops"] = ops
        out["exported_files"] = report.get("exported_files") or []
        if report.get("tokenize"):
            out["tokenize"] = report["tokenize"]
    if report and report.get("overall"):  # an analysis: overall.csv's rows
        out["overall"] = report["overall"]
    if model:
        if model.get("overall"):
            out["overall"] = model["overall"]
        if model.get("suggestions"):
            out["suggestions"] = model["suggestions"]
        if model.get("what_if"):
            out["what_if"] = model["what_if"]
        if model.get("categories"):
            out["categories"] = [{"name": c.get("name"), "op": c.get("op"), "count": c.get("count"),
                                  "unique": c.get("unique"), "top": (c.get("top") or [])[:5]}
                                 for c in model["categories"]]
        if model.get("tokens"):
            out["tokens"] = model["tokens"]
    return out


# ---------------------------------------------------------------------------------------------------- server


def _sdk():
    """(server class, CallToolResult, ToolAnnotations, ResourceError, ToolError) of the installed ``mcp`` SDK."""
    try:
        from mcp.server.mcpserver import MCPServer as Server
        from mcp.server.mcpserver.exceptions import ResourceError, ToolError
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import FastMCP as Server
        from mcp.server.fastmcp.exceptions import ResourceError, ToolError
    from mcp.types import CallToolResult, ToolAnnotations
    return Server, CallToolResult, ToolAnnotations, ResourceError, ToolError


def _returns_call_tool_result() -> bool:
    """Whether the SDK passes a CallToolResult returned by a tool through as is (2.x, and 1.x since the
    release that added it; older ones would put it into a text block)."""
    import inspect
    try:
        from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
    except ImportError:
        try:
            from mcp.server.fastmcp.utilities.func_metadata import FuncMetadata
        except ImportError:
            return False
    try:
        return "CallToolResult" in inspect.getsource(FuncMetadata.convert_result)
    except (AttributeError, OSError, TypeError):
        return False


INSTRUCTIONS = """gristmill turns raw corpora (JSONL, Parquet, CSV, text, WARC, HTML…) into training data with \
Data-Juicer-style YAML recipes (dataset_path, export_path, process: [{op_name: {params}}]).
Typical session: preview_data on the input; list_ops / describe_op to pick ops; apply_ops on a few rows to \
try a chain; validate_recipe; run_recipe (a background job) and poll job_status (wait_seconds blocks up to \
60 s); read_report for the per-op funnel, removal reasons and rejects. analyze_dataset computes the filters' \
stats without removing anything and suggests thresholds (k-sigma, what-if). Resources: gristmill://ops, \
gristmill://ops/{name}, gristmill://recipes, gristmill://recipes/{name} (example recipes). Paths must lie \
under the server's data roots; relative paths are relative to the first root."""


def build_server(data_roots: list[str], state_dir: str, allow_scripts: bool = False, max_concurrent: int = 1,
                 jobs=None, allow_private_urls: bool = False, max_image_pixels: int | None = None):
    """The MCP server (an ``MCPServer``/``FastMCP``) over the given JobManager, or one of its own created on
    first use; ``server.close_jobs()`` closes the latter."""
    import functools
    import inspect
    import json
    import threading
    import typing

    import anyio

    from . import core, gallery

    Server, CallToolResult, ToolAnnotations, ResourceError, ToolError = _sdk()
    state = {"jobs": jobs, "own": None}
    lock = threading.Lock()

    def manager():
        with lock:
            if state["jobs"] is None:
                from .jobs import JobManager
                state["jobs"] = state["own"] = JobManager(state_dir, data_roots, max_concurrent=max_concurrent,
                                                          allow_scripts=allow_scripts,
                                                          allow_private_urls=allow_private_urls,
                                                          max_image_pixels=max_image_pixels)
            return state["jobs"]

    try:
        from .. import __version__ as version
    except ImportError:
        version = ""
    kwargs = {"instructions": INSTRUCTIONS, "log_level": "WARNING"}
    try:
        mcp = Server("gristmill", version=version, **kwargs)
    except TypeError:  # mcp 1.x: no version
        mcp = Server("gristmill", **kwargs)

    passes_results = _returns_call_tool_result()

    def error_result(errors: list[dict]):
        body = {"ok": False, "errors": errors}
        text = json.dumps(body, ensure_ascii=False, default=str)
        if not passes_results:  # an mcp 1.x too old to pass a CallToolResult through: the SDK's own tool
            raise ToolError(text)  # error, whose text is "Error executing tool NAME: " then this JSON
        return CallToolResult.model_validate({"content": [{"type": "text", "text": text}],
                                              "structuredContent": body, "isError": True})

    def tool(read_only: bool = True, idempotent: bool = True, error_path: str = "", destructive: bool = False):
        """Register ``fn`` as a tool that runs in a worker thread and turns every exception into an error
        answer (no traceback reaches the client)."""
        ann = ToolAnnotations.model_validate({"readOnlyHint": read_only, "idempotentHint": idempotent,
                                              "destructiveHint": destructive, "openWorldHint": False})

        def register(fn):
            @functools.wraps(fn)
            async def call(**kw):
                try:
                    out = await anyio.to_thread.run_sync(functools.partial(fn, **kw))
                    errors = None
                except ToolFailure as e:
                    errors = e.errors
                except KeyError as e:  # an unknown op, job, recipe: the message names the closest
                    errors = [{"path": error_path, "message": str(e.args[0]) if e.args else "not found"}]
                except PermissionError as e:  # a path outside the data roots, a script op: "where: what"
                    errors = [located(str(e), error_path)]
                except (ValueError, TypeError, OSError) as e:
                    errors = getattr(e, "errors", None)  # the jobs' RecipeInvalid: validation errors
                    if not (isinstance(errors, list) and errors):
                        errors = [{"path": error_path, "message": str(e)}]
                except Exception as e:  # noqa: BLE001 - an op or reader failing: the message, not the trace
                    errors = [{"path": error_path, "message": f"{type(e).__name__}: {e}"}]
                if errors is not None:
                    return error_result(errors)
                return {"ok": True, **out}
            # the SDK reads the params from the signature; evaluated here (this module's annotations are
            # strings, which mcp 1.x cannot inspect)
            call.__signature__ = inspect.signature(fn, eval_str=True)
            call.__annotations__ = typing.get_type_hints(fn)
            mcp.add_tool(call, name=fn.__name__, annotations=ann)
            return fn
        return register

    def recipe_errors(raw: dict) -> dict:
        return manager().validate(raw)

    # ---- catalogue

    @tool()
    def list_ops(query: str | None = None, kind: str | None = None, detail: bool = False) -> dict[str, Any]:
        """List gristmill's ops (mappers, filters, deduplicators, selectors, …) to pick the steps of a recipe.
        query: a substring of the op's name or description (e.g. "dedup", "language", "url"); kind: only
        ops of this kind (mapper, filter, deduplicator, selector, grouper, aggregator).
        Each op comes with its one-line summary and params as "name: type = default"; detail=true gives each
        param's full description (long: prefer describe_op for one op)."""
        if kind:
            kinds = {o["kind"] for o in core.list_ops()}
            if kind not in kinds:
                from ..core.names import closest
                raise _fail(f"unknown kind {kind!r}{closest(kind, kinds)} (kinds: {', '.join(sorted(kinds))})", "kind")
        ops = core.list_ops(query, kind)
        if not detail:
            ops = [dict(o, params=_compact_params(o["params"])) for o in ops]
        return {"count": len(ops), "ops": ops}

    @tool(error_path="name")
    def describe_op(name: str) -> dict[str, Any]:
        """Everything about one op before using it in a recipe: what it does, its kind, each param's type,
        default and meaning, and the JSON schema of its params. An unknown name is an error naming the
        closest op."""
        return core.describe_op(name)

    @tool()
    def list_formats() -> dict[str, Any]:
        """The input formats gristmill reads (jsonl, parquet, csv, txt, html, warc, …): their file extensions
        and reader options (set in a recipe's reader_params, or preview_data's reader_params)."""
        return {"formats": core.list_formats()}

    @tool()
    def validate_recipe(recipe_yaml: str) -> dict[str, Any]:
        """Check a recipe (YAML text) without running anything: unknown keys, ops and params, bad types and
        values, and paths outside the server's data roots. Answers ok=true with the ops it would run (and
        warnings, e.g. ignored Data-Juicer keys), or ok=false with errors, each with the YAML path of the
        problem (e.g. "process[1].words_num_filter.min_nm") and a message naming the closest valid name.
        An invalid recipe is a normal answer here, not a tool error."""
        try:
            raw = _parse_yaml(recipe_yaml)
        except ToolFailure as e:
            return {"ok": False, "errors": e.errors, "warnings": [], "ops": []}
        return recipe_errors(raw)

    @tool(error_path="path")
    def preview_data(path: str, n: int = 5, text_key: str = TEXT_KEY, format: str | None = None,
                     reader_params: dict[str, Any] | None = None, max_chars: int = MAX_TEXT) -> dict[str, Any]:
        """Look at the first n rows (at most 1000) of a dataset before writing a recipe: a file, directory or
        glob in any supported format (see list_formats), as gristmill would read it (with its id). String
        fields are cut to max_chars characters (0: no limit). Use it to find the text field and the other
        fields, and to check what the data looks like."""
        full = manager().check_input(path, "path")
        with manager().trusted():
            rows = core.preview(full, n=max(0, n), text_key=text_key, format=format, **(reader_params or {}))
        return {"path": path, "count": len(rows), "rows": _shorten(_jsonable(rows), max(0, max_chars))}

    @tool(error_path="process")
    def apply_ops(rows: list[dict[str, Any]], process: list[dict[str, Any] | str], text_key: str = TEXT_KEY,
                  max_chars: int = MAX_TEXT) -> dict[str, Any]:
        """Try a short chain of ops (at most 20) on a few rows (at most 1000) in memory, to see what each op
        does before writing a recipe. process is a recipe's process list: [{"words_num_filter":
        {"min_num": 50}}, "document_deduplicator", …]; rows are JSON objects with the text in text_key.
        Answers the rows that come out (with their __stats__) and, per op, rows in / out, the removed rows
        with their reason and the rejected rows with the error. Nothing is written to disk."""
        chain = manager().check_op_paths([{p: {}} if isinstance(p, str) else p for p in process])
        with manager().trusted():
            res = core.apply_ops(rows, chain, text_key=text_key, allow_scripts=allow_scripts)
        return _shorten(_jsonable(res), max(0, max_chars))

    # ---- jobs

    def job_view(job: dict) -> dict:
        return {"job": _jsonable(job)}

    @tool(read_only=False, idempotent=False, destructive=True)  # it writes (and may replace) export_path
    def run_recipe(recipe_yaml: str, name: str | None = None) -> dict[str, Any]:
        """Run a recipe (YAML text, as for `gristmill run`) as a background job and return the job at once
        (state "queued" or "running"). Poll job_status with its id (wait_seconds to block until it ends),
        read job_logs for progress, then read_report for the results. The recipe is validated first: an
        invalid one is refused with the same errors as validate_recipe. Its paths must lie under the
        server's data roots; without work_dir the job gets one in the server's state dir."""
        raw = _parse_yaml(recipe_yaml)
        res = recipe_errors(raw)
        if not res["ok"]:
            raise ToolFailure(res["errors"])
        job = manager().submit(raw, name=name, kind="run")
        warnings = list(res["warnings"])
        if raw.get("work_dir"):
            warnings.append(f"work_dir {raw['work_dir']!r} is not used: the job's work dir is {job['work_dir']}")
        return dict(job_view(job), warnings=warnings)

    @tool(read_only=False, idempotent=False, error_path="path")
    def analyze_dataset(path: str, ops: list[dict[str, Any] | str] | None = None, what_if: list[str] | None = None,
                        k: float = 3.0, text_key: str = TEXT_KEY) -> dict[str, Any]:
        """Compute filters' stats over a whole dataset without removing anything (`gristmill analyze`), as a
        background job: read_report then gives the overall table (count, mean, std, min, quartiles, max per
        stat), k-sigma threshold suggestions (mean ± k·std) and what-if counts. ops: the filters to analyse,
        "name" or {"name": {params}} (default: cheap text stats: lengths, words, alphanumeric ratio, …);
        what_if: ["words_num_filter.min_num=100", …] to see how many rows a changed threshold would remove.
        Use it to choose thresholds before run_recipe."""
        specs = []
        for o in ops or []:
            if isinstance(o, str):
                specs.append(o)
            elif isinstance(o, dict) and len(o) == 1:
                (op_name, params), = o.items()
                specs.append(f"{op_name}: {json.dumps(params or {})}")
            else:
                raise _fail("each op is a name or {name: {params}}", "ops")
        recipe = {"dataset_path": path, "text_keys": text_key}
        try:
            job = manager().submit(recipe, kind="analyze",
                                   analyze_args={"ops": specs, "what_if": list(what_if or []), "k": k})
        except PermissionError as e:
            raise ToolFailure([_rename(located(str(e)), "dataset_path", "path")]) from None
        except ValueError as e:
            errors = getattr(e, "errors", None)
            if not isinstance(errors, list):
                raise
            raise ToolFailure([_rename(dict(x, message=x["message"].replace("process[", "ops[")),
                                       "dataset_path", "path") for x in errors]) from None
        return job_view(job)

    @tool(error_path="job_id")
    def job_status(job_id: str, wait_seconds: float = 0) -> dict[str, Any]:
        """A job's state (queued, running, done, failed, cancelled, interrupted), progress (rows, rows/s)
        while it runs, error when it failed, and per-op counts when done. wait_seconds (at most 60) blocks
        until the job ends or the time passes: poll with it instead of calling in a tight loop."""
        jm = manager()
        job = jm.get(job_id)
        if wait_seconds and wait_seconds > 0 and job.get("state") in ("queued", "running"):
            job = jm.wait(job_id, min(float(wait_seconds), MAX_WAIT))
        return job_view(job)

    @tool()
    def list_jobs(limit: int = 20) -> dict[str, Any]:
        """The jobs this server knows, newest first (at most `limit`), with their state: to find a job id
        again."""
        jobs = manager().list()
        return {"count": len(jobs), "jobs": [_jsonable(j) for j in jobs[:max(0, limit)]]}

    @tool(error_path="job_id")
    def job_logs(job_id: str, since: int = 0) -> dict[str, Any]:
        """A job's log lines from line `since` on (the CLI's messages: stages, resolve steps, warnings,
        errors), and `next`, the value of `since` for the next call."""
        return _jsonable(manager().logs(job_id, since=max(0, since)))

    @tool(read_only=False, idempotent=True, error_path="job_id")
    def cancel_job(job_id: str) -> dict[str, Any]:
        """Stop a queued or running job (its finished shards are kept: resume_job continues it)."""
        return job_view(manager().cancel(job_id))

    @tool(read_only=False, idempotent=False, error_path="job_id")
    def resume_job(job_id: str) -> dict[str, Any]:
        """Restart a cancelled, failed or interrupted job where it stopped (finished shards are reused; the
        output is the same as an uninterrupted run's)."""
        return job_view(manager().resume(job_id))

    @tool(error_path="job_id")
    def read_report(job_id: str) -> dict[str, Any]:
        """A finished job's results, compact: rows read and out, per op rows in / out / removed / rejected /
        seconds with the top removal reasons, rejects (count, reasons, file), exported files, the k-sigma
        threshold suggestions, and for an analysis the overall stats table and what-if rows. The full HTML
        report's path is report_html."""
        jm = manager()
        job = jm.get(job_id)
        report = jm.report(job_id)
        if report is None:
            raise _fail(f"job {job_id} has no report yet (state: {job.get('state')}"
                        + (f", error: {job['error']}" if job.get("error") else "") + ")", "job_id")
        html = jm.report_html_path(job_id)
        work = os.path.join(job["work_dir"], "analysis") if job.get("kind") == "analyze" else job["work_dir"]
        model = _read_json(os.path.join(work, "report_model.json"))
        out = report_summary(job, report, model)
        out["report_html"] = html
        try:
            out["outputs"] = jm.outputs(job_id)
        except (KeyError, OSError):
            pass
        return _jsonable(out)

    # ---- resources

    @mcp.resource("gristmill://ops", name="ops", mime_type="application/json",
                  description="The op catalogue: every op's name, kind, summary and params (name: type = default)")
    def ops_resource() -> str:
        return json.dumps([dict(o, params=_compact_params(o["params"])) for o in core.list_ops()], indent=1)

    @mcp.resource("gristmill://ops/{name}", name="op", mime_type="application/json",
                  description="One op: doc, params (type, default, description) and the JSON schema of its params")
    def op_resource(name: str) -> str:
        try:
            return json.dumps(core.describe_op(name), indent=1, default=str)
        except KeyError as e:
            raise ResourceError(str(e.args[0])) from None

    @mcp.resource("gristmill://recipes", name="recipes", mime_type="application/json",
                  description="The recipe gallery: example recipes (name, summary, uri) to start from")
    def recipes_resource() -> str:
        return json.dumps([dict(r, uri=f"gristmill://recipes/{r['name']}") for r in gallery.recipes()], indent=1)

    @mcp.resource("gristmill://recipes/{name}", name="recipe", mime_type="application/yaml",
                  description="A gallery recipe's YAML (paths are relative to a gristmill checkout)")
    def recipe_resource(name: str) -> str:
        try:
            return gallery.read(name)
        except KeyError as e:
            raise ResourceError(str(e.args[0])) from None

    def close_jobs():
        with lock:
            if state["own"] is not None:
                state["own"].close()
                state["own"] = state["jobs"] = None
    mcp.close_jobs = close_jobs
    return mcp


def _rename(error: dict, old: str, new: str) -> dict:
    return dict(error, path=new) if error.get("path") == old else error


def cmd_mcp(args) -> int:
    import sys
    roots = args.data_root or [os.getcwd()]
    for r in roots:
        if not os.path.isdir(r):
            print(f"error: --data-root {r}: not a directory", file=sys.stderr)
            return 2
    if args.max_concurrent < 1:
        print("error: --max-concurrent must be at least 1", file=sys.stderr)
        return 2
    token = None
    if args.transport == "http":
        from .server import check_args
        token = args.token if args.token is not None else os.environ.get("GRISTMILL_TOKEN") or None
        why = check_args(_Args(host=args.host, port=args.port, token=token, max_concurrent=args.max_concurrent,
                               data_root=roots))
        if why:
            print(f"error: {why}", file=sys.stderr)
            return 2
        sock = _listen(args.host, args.port)
        if isinstance(sock, str):
            print(f"error: {sock}", file=sys.stderr)
            return 2
    state_dir = os.path.abspath(args.state_dir)
    os.makedirs(state_dir, exist_ok=True)
    import threading
    threading.Thread(target=_warm_up, name="gristmill-mcp-warm-up", daemon=True).start()
    server = build_server(roots, state_dir, allow_scripts=args.allow_scripts, max_concurrent=args.max_concurrent,
                          allow_private_urls=args.allow_private_urls, max_image_pixels=args.max_image_pixels)
    try:
        if args.transport == "stdio":
            server.run("stdio")
        else:
            host = f"[{args.host.strip('[]')}]" if ":" in args.host else args.host
            print(f"gristmill mcp: http://{host}:{sock.getsockname()[1]}/mcp"
                  f"{'  (token required)' if token else ''}", file=sys.stderr, flush=True)
            _run_http(server, args.host, sock, token)
    except KeyboardInterrupt:
        pass
    finally:
        server.close_jobs()
        if args.transport == "http":
            sock.close()
    return 0


class _Args:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _listen(host: str, port: int):
    """A listening socket on host:port (port 0: any free one), or why not (one line)."""
    import socket
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        return f"cannot listen on {host}:{port}: {e.strerror or e}"
    return sock


def _warm_up() -> None:
    """Import every op while the client connects, so that the first catalogue call answers at once."""
    try:
        from ..registry import all_ops
        all_ops()
    except Exception:  # noqa: BLE001 - the tools report it when they need the registry
        pass


def http_app(server, host: str, token: str | None):
    """The SDK's streamable HTTP app (endpoint /mcp) behind the REST API's Guard (service.api): with a token,
    'Authorization: Bearer TOKEN' on every request; without one (loopback only), the Host header among the
    loopback names and the bound host, and no request from another site (Origin, Sec-Fetch-Site); JSON
    bodies of at most api.MAX_BODY bytes, read before the SDK parses them."""
    import inspect

    from .guard import Guard
    from .http import MAX_BODY
    params = inspect.signature(server.streamable_http_app).parameters
    if "host" in params:  # mcp 2.x
        app = server.streamable_http_app(host=host)
    else:  # mcp 1.x: host is a setting
        server.settings.host = host
        app = server.streamable_http_app()
    hosts = None if token else ["127.0.0.1", "localhost", "::1", host]
    return Guard(app, token=token, max_body=MAX_BODY, allowed_hosts=hosts, open_paths=(), open_prefixes=())


def _run_http(server, host: str, sock, token: str | None = None) -> None:
    import uvicorn
    config = uvicorn.Config(http_app(server, host, token), log_level="warning", access_log=False,
                            timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])
