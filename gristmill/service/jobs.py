"""Jobs of the service: recipe runs and analyses, each a worker subprocess (``service/worker.py``: the pipeline
or the analysis app, as ``gristmill run`` / ``gristmill analyze`` run them) in its own process group, persisted in SQLite so a restarted server lists (and resumes) them.

Layout: ``STATE/jobs.sqlite`` (WAL) and one directory per job, ``STATE/jobs/<id>/``: ``recipe.yaml`` (paths made
absolute, work dir set), ``work/`` (the engine's work dir: resume state, report.json, report.html),
``log.txt`` (the subprocess' output, appended across resumes), ``progress.json`` (the engine's live
progress, see gristmill/engine/progress.py), ``exit_code`` (written by the job's wrapper process when the
command ends) and ``out/`` (the default export).

The subprocess is a small wrapper (``python -m gristmill.service.jobs --exec JOB -- CMD...``) that runs the
command, records its exit status in ``JOB/exit_code`` and exits with it, so a job outlives a server that
dies and a new server still learns how it ended. Cancel sends SIGINT to the job's process group: the engine
stops within seconds (exit 130) and leaves a resumable work dir; resume reruns the same command, which skips
finished shards. Several managers (REST and MCP servers) may share a state dir: a queued job is claimed by
one atomic UPDATE."""
from __future__ import annotations

import json
import os
import re
import secrets
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

from ..core import trust
from .paths import check_input, check_path, map_dataset_path, norm_roots

STATES = ("queued", "running", "done", "failed", "cancelled", "interrupted")
FINISHED = ("done", "failed", "cancelled", "interrupted")
RESUMABLE = ("cancelled", "failed", "interrupted")
CANCEL_GRACE = 20.0  # seconds after SIGINT before the job's process group gets SIGKILL
TICK = 0.2  # scheduler period (seconds)
MAX_LOG_LINES = 2000  # lines returned by one logs() call

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT UNIQUE NOT NULL,
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  created TEXT NOT NULL,
  started TEXT,
  finished TEXT,
  exit_code INTEGER,
  error TEXT,
  pid INTEGER,
  pid_start TEXT,
  cancel_requested REAL,
  command TEXT NOT NULL,
  job_dir TEXT NOT NULL,
  work_dir TEXT NOT NULL,
  export_path TEXT,
  progress TEXT,
  ops TEXT
)"""


class RecipeInvalid(ValueError):
    """The recipe failed validation; ``errors`` are service.core.validate_recipe's ``[{path, message}]``."""

    def __init__(self, errors: list[dict], warnings: list | None = None):
        self.errors = errors
        self.warnings = warnings or []
        first = errors[0] if errors else {"path": "", "message": "invalid recipe"}
        where = f"{first['path']}: " if first.get("path") else ""
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"invalid recipe: {where}{first['message']}{more}")


class JobStateError(ValueError):
    """The job is not in a state that allows this (cancel a finished job, resume a done one)."""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _proc_start(pid: int) -> str | None:
    """The process' start time (clock ticks since boot) to tell it from a later process with the same pid;
    None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
        fields = data[data.rindex(")") + 2:].split()
        if fields[0] == "Z":  # a zombie has ended
            return None
        return fields[19]
    except (OSError, ValueError, IndexError):
        try:
            os.kill(pid, 0)
            return ""
        except ProcessLookupError:
            return None
        except PermissionError:
            return ""


def _safe_name(name: str) -> str:
    keep = "".join(c if c.isalnum() or c in "._-" else "_" for c in name).strip("._")
    return keep[:80] or "job"


_WHERE = re.compile(r"^([A-Za-z_][\w.\[\]]*): (.+)$", re.S)


def located(message: str, default: str = "") -> dict:
    """``"dataset_path: 'x' is outside …"`` → ``{"path": "dataset_path", "message": "'x' is outside …"}``."""
    m = _WHERE.match(message)
    return {"path": m[1], "message": m[2]} if m else {"path": default, "message": message}


class JobManager:
    def __init__(self, state_dir: str, data_roots: list[str], max_concurrent: int = 1, allow_scripts: bool = False,
                 allow_private_urls: bool = False, max_image_pixels: int | None = None):
        self.state_dir = os.path.abspath(state_dir)
        self.jobs_dir = os.path.join(self.state_dir, "jobs")
        os.makedirs(self.jobs_dir, exist_ok=True)
        self.roots = norm_roots(data_roots or [os.getcwd()])
        self.base = self.roots[0]  # relative paths in requests are relative to the first data root
        self.allowed = norm_roots([*self.roots, self.jobs_dir])
        self.max_concurrent = max(1, int(max_concurrent))
        self.allow_scripts = allow_scripts
        # what requests and the jobs they start may reach (core/trust.py): files in the roots and the jobs'
        # dirs, no model or user code without --allow-scripts, public URLs only without --allow-private-urls
        self.policy = trust.service_policy(self.allowed, allow_code=allow_scripts,
                                           allow_private_urls=allow_private_urls, max_pixels=max_image_pixels)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(os.path.join(self.state_dir, "jobs.sqlite"), timeout=30,
                                   check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._db.execute(_SCHEMA)
        self._procs: dict[str, subprocess.Popen] = {}  # jobs this manager started
        self._closed = False
        self._wake = threading.Event()
        self._recover()
        self._thread = threading.Thread(target=self._loop, name="gristmill-jobs", daemon=True)
        self._thread.start()

    # -- public API ---------------------------------------------------------------------------------
    def submit(self, recipe: dict, name: str | None = None, kind: str = "run",
               analyze_args: dict | None = None) -> dict:
        """Check every path ``recipe`` names against the data roots (PermissionError; script ops too), validate it
        (RecipeInvalid, a ValueError carrying validate_recipe's errors; a dataset that is not there), create the
        job's directory and queue it. ``analyze_args`` (kind analyze): ``ops``, ``what_if``, ``k``."""
        if kind not in ("run", "analyze"):
            raise ValueError(f"kind must be 'run' or 'analyze', got {kind!r}")
        if not isinstance(recipe, dict):
            raise RecipeInvalid([{"path": "", "message": "a recipe is a mapping of settings"}])
        analyze_args = dict(analyze_args or {})
        self.check_scripts(recipe, analyze_args.get("ops") or [])
        name = str(name or recipe.get("project_name") or ("analysis" if kind == "analyze" else "job"))[:200]
        job_id = self._new_id()
        job_dir = os.path.join(self.jobs_dir, job_id)
        work = os.path.join(job_dir, "work")
        # paths first (validation may open files a recipe names: the tokenizer, a URL list), then the recipe
        r = self.prepare_recipe(recipe, kind, job_dir, name)
        if kind == "analyze":
            self._check_analyze_args(analyze_args)
        from .core import validate_recipe
        with self.trusted():  # the recipe as it will run: its paths absolute, inside the roots
            v = validate_recipe(dict(r), allow_scripts=self.allow_scripts)
        if not v["ok"]:
            raise RecipeInvalid(v["errors"], v["warnings"])
        if not r.get("download"):
            for spec in self._inputs(r):
                self._check_exists(spec)
        import yaml

        from .core import MAX_STORED_RECIPE, TooLarge
        text = yaml.safe_dump(r, sort_keys=False, allow_unicode=True)  # bounded before anything is written
        if len(text.encode("utf-8")) > MAX_STORED_RECIPE:
            raise TooLarge(f"the recipe is {len(text.encode('utf-8')):,} bytes as YAML, over the limit of "
                           f"{MAX_STORED_RECIPE:,}")
        os.makedirs(work)
        with open(os.path.join(job_dir, "recipe.yaml"), "w", encoding="utf-8") as f:
            f.write(text)
        open(os.path.join(job_dir, "log.txt"), "a").close()
        cmd = self._command(kind, job_dir, r, analyze_args)
        with self._lock:
            self._db.execute(
                "INSERT INTO jobs (id, name, kind, state, created, command, job_dir, work_dir, export_path) "
                "VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?)",
                (job_id, name, kind, now_iso(), json.dumps(cmd), job_dir, work,
                 r.get("export_path") if kind == "run" else None))
        self._wake.set()
        return self.get(job_id)

    def get(self, job_id: str) -> dict:
        row = self._row(job_id)
        return self._to_dict(row)

    def list(self) -> list[dict]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM jobs ORDER BY seq DESC").fetchall()
        return [self._to_dict(r) for r in rows]

    def cancel(self, job_id: str) -> dict:
        """A queued job is cancelled at once; a running one gets SIGINT (its engine stops within seconds,
        exit 130, work dir resumable; SIGKILL after CANCEL_GRACE s)."""
        row = self._row(job_id)
        if row["state"] == "queued":
            with self._lock:
                cur = self._db.execute("UPDATE jobs SET state='cancelled', finished=?, cancel_requested=? "
                                       "WHERE id=? AND state='queued'", (now_iso(), time.time(), job_id))
            if cur.rowcount:
                return self.get(job_id)
            row = self._row(job_id)
        if row["state"] != "running":
            raise JobStateError(f"job {job_id} is {row['state']}: nothing to cancel")
        with self._lock:
            self._db.execute("UPDATE jobs SET cancel_requested=? WHERE id=? AND cancel_requested IS NULL",
                             (time.time(), job_id))
        self._signal(row, signal.SIGINT)
        return self.get(job_id)

    def resume(self, job_id: str) -> dict:
        """Queue a cancelled / failed / interrupted job again: the same command, whose engine skips the shards
        its work dir already holds."""
        row = self._row(job_id)
        if row["state"] not in RESUMABLE:
            raise JobStateError(f"job {job_id} is {row['state']}: only a cancelled, failed or interrupted job "
                                f"can be resumed")
        with self._lock:
            cur = self._db.execute(
                "UPDATE jobs SET state='queued', started=NULL, finished=NULL, exit_code=NULL, error=NULL, pid=NULL, "
                "pid_start=NULL, cancel_requested=NULL, ops=NULL WHERE id=? AND state=?", (job_id, row["state"]))
        if not cur.rowcount:
            raise JobStateError(f"job {job_id} changed state meanwhile; try again")
        self._append_log(row["job_dir"], f"--- resumed {now_iso()} ---")
        job = self.get(job_id)  # read before waking the scheduler: the caller sees the job as queued, always
        self._wake.set()
        return job

    def logs(self, job_id: str, since: int = 0) -> dict:
        """Lines of the job's log from line ``since`` (at most MAX_LOG_LINES); ``next`` is the ``since`` of the
        next call."""
        row = self._row(job_id)
        since = max(0, int(since))
        try:
            with open(os.path.join(row["job_dir"], "log.txt"), encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            text = ""
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        elif lines and row["state"] in ("queued", "running"):
            lines.pop()  # a line still being written
        out = lines[since:since + MAX_LOG_LINES]
        return {"lines": out, "next": since + len(out)}

    def report(self, job_id: str) -> dict | None:
        """The run's report.json (an analysis: its report.json plus ``overall``, and the what-if rows and
        threshold suggestions when there are some); None until there is one."""
        row = self._row(job_id)
        if row["kind"] == "analyze":
            adir = os.path.join(row["work_dir"], "analysis")
            rep = _read_json(os.path.join(adir, "report.json"))
            if rep is None:
                return None
            model = _read_json(os.path.join(adir, "report_model.json")) or {}
            # {labels: [count, mean, ...], columns: {stat: {label: value}}}: overall.csv's table, typed
            rep["overall"] = model.get("overall") or _read_overall(os.path.join(adir, "overall.csv"))
            for key in ("what_if", "suggestions"):
                if model.get(key) is not None:
                    rep[key] = model[key]
            return rep
        return _read_json(os.path.join(row["work_dir"], "report.json"))

    def report_html_path(self, job_id: str) -> str | None:
        row = self._row(job_id)
        sub = ("analysis",) if row["kind"] == "analyze" else ()
        p = os.path.join(row["work_dir"], *sub, "report.html")
        return p if os.path.isfile(p) else None

    def outputs(self, job_id: str) -> list[dict]:
        """The files the job produced, ``[{name, path, bytes}]``: a run's export files (named relative to the
        export's directory), an analysis' overall.csv and stats.parquet."""
        row = self._row(job_id)
        if row["kind"] == "analyze":
            adir = os.path.join(row["work_dir"], "analysis")
            files = [os.path.join(adir, n) for n in ("overall.csv", "stats.parquet")]
            files = [f for f in files if os.path.isfile(f)]
            return [{"name": os.path.basename(f), "path": f, "bytes": os.path.getsize(f)} for f in files]
        rep = _read_json(os.path.join(row["work_dir"], "report.json")) or {}
        files = [f for f in rep.get("exported_files") or [] if os.path.isfile(f)]
        if not files:
            return []
        exp = rep.get("export_path") or row["export_path"] or files[0]
        top = os.path.abspath(exp) if os.path.isdir(exp) else os.path.dirname(os.path.abspath(exp))
        out = []
        for f in files:
            rel = os.path.relpath(os.path.abspath(f), top)
            name = rel if not rel.startswith("..") else os.path.basename(f)
            out.append({"name": name.replace(os.sep, "/"), "path": os.path.abspath(f), "bytes": os.path.getsize(f)})
        return out

    def wait(self, job_id: str, timeout: float) -> dict:
        """The job once it has finished, or as it is when ``timeout`` seconds have passed."""
        end = time.monotonic() + timeout
        while True:
            job = self.get(job_id)
            if job["state"] in FINISHED or time.monotonic() >= end:
                return job
            time.sleep(min(0.1, max(0.0, end - time.monotonic())))

    def close(self, interrupt_running: bool = True) -> None:
        """Stop the scheduler. Jobs this manager started get SIGINT and are marked interrupted (resumable)
        unless ``interrupt_running`` is False, in which case they run on and a later manager adopts them."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        self._thread.join(timeout=5)
        if interrupt_running:
            for job_id, proc in list(self._procs.items()):
                if proc.poll() is None:
                    try:
                        os.killpg(proc.pid, signal.SIGINT)
                    except OSError:
                        pass
            end = time.monotonic() + CANCEL_GRACE
            for job_id, proc in list(self._procs.items()):
                try:
                    proc.wait(timeout=max(0.1, end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except OSError:
                        pass
                    proc.wait()
                self._finish(job_id, proc.returncode, shutdown=True)
        with self._lock:
            self._db.close()

    # -- checks --------------------------------------------------------------------------------------
    def validate(self, recipe) -> dict:
        """What submitting ``recipe`` would say, without creating a job: the server's checks first (script
        ops; every path under the data roots, so validation never opens a file outside them), then the
        recipe's own (``core.validate_recipe``: keys, ops, params, types, with YAML paths)."""
        with self.trusted():
            return self._validate(recipe)

    def _validate(self, recipe) -> dict:
        from .core import validate_recipe
        if isinstance(recipe, dict):
            try:
                self.check_scripts(recipe)
                recipe = self.prepare_recipe(recipe, "run", os.path.join(self.jobs_dir, "validate"), "validate")
            except PermissionError as e:
                return {"ok": False, "errors": [located(str(e))], "warnings": [], "ops": []}
            except (ValueError, TypeError) as e:
                res = validate_recipe(recipe, allow_scripts=self.allow_scripts)
                if not res["ok"]:
                    return res
                errors = getattr(e, "errors", None)
                return dict(res, ok=False, errors=errors if isinstance(errors, list) else [located(str(e))])
        try:
            return validate_recipe(recipe, allow_scripts=self.allow_scripts)
        except PermissionError as e:  # an op param the policy refuses (core/trust.py)
            return {"ok": False, "errors": [located(str(e))], "warnings": [], "ops": []}

    def trusted(self):
        """A context in which the server's policy holds (in-process work for a request: validation, preview,
        apply): ops built there check their path params, rows' files and URLs are checked as they open."""
        return trust.active(self.policy)

    def check_scripts(self, recipe: dict, extra_ops: list = ()) -> None:
        """PermissionError when the recipe (or the analysis' ops) asks for user code and the server does not
        allow scripts."""
        if self.allow_scripts:
            return
        if recipe.get("allow_scripts") or "custom_operator_paths" in recipe:
            raise PermissionError("script ops (allow_scripts, custom_operator_paths) are not allowed on this server "
                                  "(start it with --allow-scripts)")
        names = []
        for entry in recipe.get("process") or []:
            if isinstance(entry, str):
                names.append(entry)
            elif isinstance(entry, dict) and len(entry) == 1:
                names.append(next(iter(entry)))
        names += [str(s).partition(":")[0].strip() for s in extra_ops or []]
        from ..registry import all_ops
        ops = all_ops()
        for n in names:
            cls = ops.get(n) if isinstance(n, str) else None
            if cls is not None and getattr(cls, "is_script", False):
                raise PermissionError(f"op {n!r} runs user code: not allowed on this server "
                                      f"(start it with --allow-scripts)")

    def check_op_paths(self, process, where: str = "process") -> list:
        """``process`` with every path param its ops declare (``trust.path_param``: word lists, models, URL lists,
        save dirs) made absolute against the first data root and checked (PathRefused when outside the roots;
        a write path may not exist yet). A model param holding a store name (``en.arpa.bin``, ``org/model``) is
        left to the store. Entries that are not ops are left for validation to report."""
        from ..registry import all_ops
        ops = all_ops()
        out = []
        for i, entry in enumerate(process or []):
            if isinstance(entry, dict) and len(entry) == 1:
                name, params = next(iter(entry.items()))
                cls = ops.get(name) if isinstance(name, str) else None
                if cls is not None and isinstance(params, dict):
                    params = dict(params)
                    for key, kind in trust.path_params(cls.Params).items():
                        if key in params:
                            params[key] = self._op_path(params[key], kind, f"{where}[{i}].{name}.{key}")
                    entry = {name: params}
            out.append(entry)
        return out

    def _op_path(self, v, kind: str, what: str):
        if isinstance(v, list):
            return [self._op_path(x, kind, what) for x in v]
        if not isinstance(v, str) or not v:
            return v
        if kind == "model" and not os.path.lexists(os.path.join(self.base, os.path.expanduser(v))) \
                and trust.is_model_name(v):
            return v
        return self.check_output(v, what) if kind == "write" else self.check_input(v, what)

    def check_input(self, path, what: str = "path") -> str:
        """An input path (file, directory, glob) checked against the data roots: absolute, or PathRefused."""
        return check_input(path, self.allowed, self.base, what)

    def check_output(self, path, what: str = "export_path") -> str:
        return check_path(path, self.allowed, self.base, what)

    def prepare_recipe(self, recipe: dict, kind: str, job_dir: str, name: str) -> dict:
        """The recipe as the job runs it: every path checked (PathRefused) and made absolute, the work dir the
        job's, the default export JOB/out/NAME.jsonl."""
        r = dict(recipe)
        if isinstance(r.get("process"), list):
            r["process"] = self.check_op_paths(r["process"])
        if r.get("dataset_path") is not None:
            r["dataset_path"] = map_dataset_path(r["dataset_path"], lambda p: self.check_input(p, "dataset_path"))
        if isinstance(r.get("sources"), list):
            r["sources"] = [self._prepare_source(s, i) for i, s in enumerate(r["sources"])]
        if isinstance(r.get("dataset"), dict) and isinstance(r["dataset"].get("configs"), list):
            r["dataset"] = dict(r["dataset"], configs=[
                dict(c, path=self.check_input(c["path"], f"dataset.configs[{i}].path"))
                if isinstance(c, dict) and isinstance(c.get("path"), str) else c
                for i, c in enumerate(r["dataset"]["configs"])])
        if kind == "run":
            tokenize_only = r.get("tokenize") and all(r.get(k) is None for k in ("dataset_path", "sources", "dataset"))
            if r.get("export_path"):
                r["export_path"] = self.check_output(r["export_path"])
            elif not tokenize_only:  # a tokenize-only recipe exports nothing: its output is the token files
                r["export_path"] = os.path.join(job_dir, "out", f"{_safe_name(name)}.jsonl")
        elif r.get("export_path"):
            r["export_path"] = self.check_output(r["export_path"])
        r["work_dir"] = os.path.join(job_dir, "work")
        if isinstance(r.get("tokenize"), dict):
            r["tokenize"] = self._prepare_tokenize(dict(r["tokenize"]))
        if isinstance(r.get("download"), dict):
            r["download"] = self._prepare_download(dict(r["download"]))
        return r

    def _prepare_source(self, s, i: int):
        """One entry of ``sources:`` with its path(s) checked and made absolute, its own ops' paths checked."""
        if not isinstance(s, dict):
            return s
        s = dict(s)
        at = f"sources[{i}]"
        if s.get("path") is not None:
            s["path"] = map_dataset_path(s["path"], lambda p: self.check_input(p, f"{at}.path"))
        if isinstance(s.get("process"), list):
            s["process"] = self.check_op_paths(s["process"], f"{at}.process")
        return s

    @staticmethod
    def _inputs(r: dict) -> list:
        """The input specs a recipe reads (dataset_path, each source's path, Data-Juicer's dataset configs)."""
        out = [r["dataset_path"]] if r.get("dataset_path") is not None else []
        for s in r.get("sources") or []:
            if isinstance(s, dict) and s.get("path") is not None:
                out += s["path"] if isinstance(s["path"], list) else [s["path"]]
        if isinstance(r.get("dataset"), dict):
            out += [c["path"] for c in r["dataset"].get("configs") or [] if isinstance(c, dict) and c.get("path")]
        return out

    def _check_exists(self, spec) -> None:
        from ..io.planner import expand, parse_weighted
        try:
            for _, p in parse_weighted(spec):
                expand(p)
        except (FileNotFoundError, ValueError) as e:
            raise RecipeInvalid([{"path": "dataset_path", "message": str(e)}]) from None

    def _prepare_tokenize(self, t: dict) -> dict:
        for key in ("output", "export_path"):
            if t.get(key):
                t[key] = self.check_output(t[key], f"tokenize.{key}")
        for key in ("sources", "dataset_path"):
            if t.get(key) is None:
                continue
            items = t[key] if isinstance(t[key], list) else [t[key]]
            out = []
            for it in items:
                if isinstance(it, dict) and "path" in it:
                    paths = it["path"]
                    fn = (lambda q: self.check_input(q, f"tokenize.{key}"))
                    it = {**it, "path": [fn(q) for q in paths] if isinstance(paths, list) else fn(paths)}
                    out.append(it)
                else:
                    out.append(map_dataset_path(it, lambda q: self.check_input(q, f"tokenize.{key}")))
            t[key] = out if isinstance(t[key], list) else out[0]
        tok = t.get("tokenizer")
        if isinstance(tok, str) and (os.sep in tok or os.path.exists(os.path.join(self.base, tok))):
            t["tokenizer"] = self.check_input(tok, "tokenize.tokenizer")
        return t

    def _prepare_download(self, d: dict) -> dict:
        if d.get("allow_file_urls"):
            raise PermissionError("download.allow_file_urls: file:// URLs are not allowed on this server")
        if d.get("out_dir"):
            d["out_dir"] = self.check_output(d["out_dir"], "download.out_dir")
        if isinstance(d.get("urls"), str) and "://" not in d["urls"]:
            d["urls"] = self.check_input(d["urls"], "download.urls")
        if d.get("checksums"):
            d["checksums"] = self.check_input(d["checksums"], "download.checksums")
        return d

    def _check_analyze_args(self, a: dict) -> None:
        unknown = set(a) - {"ops", "what_if", "k"}
        if unknown:
            raise ValueError(f"unknown analyze option(s): {', '.join(sorted(unknown))}")
        for key in ("ops", "what_if"):
            v = a.get(key) or []
            if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() and not x.startswith("-")
                                                  for x in v):
                raise ValueError(f"{key} must be a list of strings")
        if a.get("ops"):
            import yaml
            process = []
            for spec in a["ops"]:
                op, sep, rest = spec.partition(":")
                try:
                    params = yaml.safe_load(rest) if sep and rest.strip() else {}
                except yaml.YAMLError:
                    params = None
                process.append({op.strip(): params})
            self.check_op_paths(process, "ops")
            from ..analysis.analyze import parse_ops
            try:
                parse_ops(a["ops"], self.allow_scripts)
            except Exception as e:  # a RecipeError, a YAML error in 'NAME: {params}'
                raise RecipeInvalid([{"path": "ops", "message": line.removeprefix("--ops: ")}
                                     for line in str(e).splitlines() if line.strip()]) from None
        if a.get("k") is not None and not isinstance(a["k"], (int, float)):
            raise ValueError("k must be a number")

    # -- internals -----------------------------------------------------------------------------------
    def _command(self, kind: str, job_dir: str, r: dict, a: dict) -> list[str]:
        """The job's worker (service/worker.py): the pipeline, or with ``--analyze`` the analysis app with
        the options written to ``JOB/analyze.json``; errors come back as data in ``JOB/result.json``."""
        from .worker import ANALYZE_ARGS
        cmd = [sys.executable, "-m", "gristmill.service.worker", job_dir]
        if kind == "analyze":
            with open(os.path.join(job_dir, ANALYZE_ARGS), "w", encoding="utf-8") as f:
                json.dump({"ops": a.get("ops") or [], "what_if": a.get("what_if") or [],
                           "k": float(a["k"]) if a.get("k") is not None else 3.0}, f)
            cmd.append("--analyze")
        return cmd + ["--allow-scripts"] if self.allow_scripts and r.get("allow_scripts") else cmd

    def _new_id(self) -> str:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        while True:
            job_id = f"{stamp}-{secrets.token_hex(3)}"
            if not os.path.exists(os.path.join(self.jobs_dir, job_id)):
                return job_id

    def _row(self, job_id: str) -> sqlite3.Row:
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE id=?", (str(job_id),)).fetchone()
        if row is None:
            raise KeyError(f"no job {job_id!r}")
        return row

    def _to_dict(self, row: sqlite3.Row) -> dict:
        progress = json.loads(row["progress"]) if row["progress"] else None
        if row["state"] == "running":
            progress = _read_json(os.path.join(row["job_dir"], "progress.json")) or progress
        return {"id": row["id"], "name": row["name"], "kind": row["kind"], "state": row["state"],
                "created": row["created"], "started": row["started"], "finished": row["finished"],
                "exit_code": row["exit_code"], "error": row["error"], "progress": progress,
                "ops": json.loads(row["ops"]) if row["ops"] else None, "work_dir": row["work_dir"],
                "export_path": row["export_path"]}

    def _signal(self, row, sig) -> None:
        pid = row["pid"]
        if not pid:
            return
        proc = self._procs.get(row["id"])
        if proc is None and _proc_start(pid) != row["pid_start"]:
            return  # not ours and no longer that process
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _append_log(self, job_dir: str, line: str) -> None:
        try:
            with open(os.path.join(job_dir, "log.txt"), "a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError:
            pass

    def _recover(self) -> None:
        """At start: a job marked running whose process is gone is interrupted (or, if its wrapper recorded an
        exit status, finished with it); one still running (a manager that died, another manager) is watched."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM jobs WHERE state='running'").fetchall()
        for row in rows:
            if row["pid"] and _proc_start(row["pid"]) == row["pid_start"]:
                continue  # alive: the loop watches it
            self._finish(row["id"], None)

    def _loop(self) -> None:
        while not self._closed:
            try:
                self._tick()
            except sqlite3.Error:
                pass  # the next tick retries (a locked database, a manager closing)
            except Exception as e:  # pragma: no cover - keep scheduling whatever one job did
                print(f"gristmill jobs: scheduler error: {e!r}", file=sys.stderr)
            self._wake.wait(TICK)
            self._wake.clear()

    def _tick(self) -> None:
        for job_id, proc in list(self._procs.items()):
            if proc.poll() is not None:
                self._finish(job_id, proc.returncode)
        with self._lock:
            running = self._db.execute("SELECT * FROM jobs WHERE state='running'").fetchall()
        for row in running:
            if row["id"] not in self._procs and (not row["pid"] or _proc_start(row["pid"]) != row["pid_start"]):
                if row["pid"] or (row["started"] and _age(row["started"]) > 30):
                    self._finish(row["id"], None)  # started by a manager that is gone, and now ended
                continue
            if row["cancel_requested"] and time.time() - row["cancel_requested"] > CANCEL_GRACE:
                self._signal(row, signal.SIGKILL)
        if self._closed:
            return
        free = self.max_concurrent - len(running)
        while free > 0 and not self._closed:
            with self._lock:
                row = self._db.execute("SELECT * FROM jobs WHERE state='queued' ORDER BY seq LIMIT 1").fetchone()
                if row is None:
                    return
                cur = self._db.execute("UPDATE jobs SET state='running', started=? WHERE id=? AND state='queued'",
                                       (now_iso(), row["id"]))
            if cur.rowcount:
                self._start(row)
                free -= 1

    def _start(self, row) -> None:
        job_dir = row["job_dir"]
        for name in ("exit_code", "progress.json", "result.json"):
            try:
                os.unlink(os.path.join(job_dir, name))
            except OSError:
                pass
        env = dict(os.environ, GRISTMILL_PROGRESS_FILE=os.path.join(job_dir, "progress.json"),
                   PYTHONUNBUFFERED="1", NO_COLOR="1", TERM="dumb")
        env.pop("GRISTMILL_TOKEN", None)  # the job has no use for the server's secret
        env[trust.ENV] = trust.to_env(self.policy)  # the job and its workers run under the server's policy
        cmd = [sys.executable, "-m", "gristmill.service.jobs", "--exec", job_dir, "--", *json.loads(row["command"])]
        try:
            log = open(os.path.join(job_dir, "log.txt"), "ab")
            try:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        cwd=self.base if os.path.isdir(self.base) else job_dir, env=env,
                                        start_new_session=True)
            finally:
                log.close()
        except OSError as e:
            with self._lock:
                self._db.execute("UPDATE jobs SET state='failed', finished=?, error=? WHERE id=?",
                                 (now_iso(), f"could not start: {e}", row["id"]))
            return
        self._procs[row["id"]] = proc
        with self._lock:
            self._db.execute("UPDATE jobs SET pid=?, pid_start=? WHERE id=?",
                             (proc.pid, _proc_start(proc.pid), row["id"]))

    def _finish(self, job_id: str, code: int | None, shutdown: bool = False) -> None:
        """Record how a job ended: ``code`` is its exit status (None: learn it from JOB/exit_code)."""
        self._procs.pop(job_id, None)
        row = self._row(job_id)
        if row["state"] != "running":
            return
        if code is None:
            try:
                with open(os.path.join(row["job_dir"], "exit_code")) as f:
                    code = int(f.read().strip())
            except (OSError, ValueError):
                code = None
        cancelled = row["cancel_requested"] is not None
        ops = None
        error = None
        if code == 0:
            state = "done"
            rep = self.report(job_id) or {}
            ops = [{k: o.get(k) for k in ("op", "position", "rows_in", "rows_out", "removed", "rejected",
                                          "seconds")} for o in rep.get("ops") or []]
        elif cancelled and code in (None, 130, 143, -2, -9, -15, 137):
            state = "cancelled"
        elif code in (None, 130, 143, -2, -9, -15, 137) or shutdown:
            state = "interrupted"
            error = "the job's process ended without finishing (server stopped or process killed); resume it" \
                if code is None or code < 0 or code == 137 else None
        else:
            state = "failed"
            from .worker import read_error
            error = (read_error(row["job_dir"]) or _last_error(os.path.join(row["job_dir"], "log.txt"))
                     or f"exit status {code}")
        progress = _read_json(os.path.join(row["job_dir"], "progress.json"))
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET state=?, finished=?, exit_code=?, error=?, ops=?, progress=? "
                "WHERE id=? AND state='running'",
                (state, now_iso(), code, error, json.dumps(ops) if ops is not None else None,
                 json.dumps(progress) if progress else row["progress"], job_id))
        self._wake.set()


def _age(iso: str) -> float:
    try:
        t = datetime.fromisoformat(iso.replace("Z", "+00:00"))
        return (datetime.now(timezone.utc) - t).total_seconds()
    except ValueError:
        return 0.0


def _read_json(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _read_overall(path: str) -> dict | None:
    """overall.csv (a row per label, a column per stat) as ``{labels, columns: {stat: {label: value}}}``."""
    import csv
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except OSError:
        return None
    if not rows:
        return None
    stats, labels = rows[0][1:], [r[0] for r in rows[1:]]
    return {"labels": labels, "columns": {s: {r[0]: r[i + 1] for r in rows[1:] if i + 1 < len(r)}
                                          for i, s in enumerate(stats)}}


def _last_error(log_path: str) -> str | None:
    """The last ``error:`` line of a log (else its last line), one line."""
    try:
        with open(log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 65536))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    lines = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("--- resumed")]
    for ln in reversed(lines):
        if ln.startswith("error:") or "Error" in ln.split(":")[0]:
            return ln[:500]
    return lines[-1][:500] if lines else None


def _exec(job_dir: str, cmd: list[str]) -> int:
    """The job's wrapper: run ``cmd`` (in this process group, which the manager signals), write its exit
    status to JOB/exit_code, exit with it. SIGINT / SIGTERM reach the command through the group; here they
    only wait for it (a caught signal's handler is not inherited by the command)."""
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda *_: None)
    proc = subprocess.Popen(cmd)
    while True:
        try:
            code = proc.wait()
            break
        except InterruptedError:  # pragma: no cover
            continue
    if code < 0:
        code = 128 - code
    tmp = os.path.join(job_dir, f".exit_code.tmp-{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(str(code))
    os.replace(tmp, os.path.join(job_dir, "exit_code"))
    return code


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "--exec" and sys.argv[3] == "--":
        sys.exit(_exec(sys.argv[2], sys.argv[4:]))
    print("usage: python -m gristmill.service.jobs --exec JOB_DIR -- COMMAND...", file=sys.stderr)
    sys.exit(2)
