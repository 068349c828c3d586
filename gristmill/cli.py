"""`gristmill run | ops | formats | head | tokenize | download`."""
from __future__ import annotations

import argparse
import json
import os
import sys

from .core import defaults as D


def _console():
    from rich.console import Console
    # soft_wrap: a message stays one line (tables still fit the width)
    return Console(stderr=True, width=None if sys.stderr.isatty() else 200, soft_wrap=True)


def cmd_run(args) -> int:
    """`gristmill run`: the recipe's plan through the pipeline, rendered on the console."""
    _start_workers_early(args)
    from .pipeline import PipelineError, plan_recipe, run
    con = _console()
    try:
        plan = plan_recipe(args.recipe, np=args.np, work_dir=args.work_dir, progress=not args.no_progress,
                           engine=args.engine, address=args.address, allow_scripts=args.allow_scripts,
                           max_reject_ratio=args.max_reject_ratio)
    except PipelineError as e:
        return print_error(e, con)
    for w in plan.warnings:
        con.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    _warn_np(plan.cfg.np, con)
    name, _, rest = plan.describe().partition(": ")
    con.print(f"[bold]{escape(name)}[/bold]: {escape(rest)}", highlight=False)
    res = run(plan, ConsoleObserver(con))
    if res.error is not None:
        return print_error(res.error, con)
    return res.status


def _start_workers_early(args) -> None:
    """Start the local engine's fork server now, while this process imports and plans: on a 16-core machine
    planning took ~2 s and the server's own start (its imports, numba's set-up) ~3 s, waited for after
    planning (issue 25). Only for a recipe file with an explicit ``np`` > 1 whose ops the index knows; the
    run's pool uses this server when its worker count and op modules are the ones read here, else starts
    its own (a wrong guess costs some CPU, never a result). Anything unexpected: nothing started."""
    try:
        import yaml
        with open(args.recipe) as f:
            raw = yaml.safe_load(f)
        np_ = args.np if args.np is not None else raw.get("np")
        np_ = int(np_) if isinstance(np_, (int, float)) or (isinstance(np_, str) and np_.isdigit()) else 0
        if np_ < 2 or (args.engine or raw.get("engine") or "local") != "local":
            return
        if isinstance(raw.get("sources"), list):
            # one server for every source, the shared chain and tokenize: no op modules preloaded (the
            # workers import them, engine.multisource._shared_executor)
            from .engine.pool import shard_worker, start_server
            start_server(np_, shard_worker())
            return
        if not raw.get("dataset_path") or not isinstance(raw.get("process"), list):
            return
        from .ops._index import OPS  # the generated index itself: the registry imports pydantic (~0.04 s)
        names = [next(iter(p)) if isinstance(p, dict) else p for p in raw["process"]]
        modules = {OPS.get(n) for n in names if isinstance(n, str)}
        if not names or None in modules:
            return
        from .engine.pool import shard_worker, start_server
        start_server(np_, shard_worker(modules))
    except Exception:  # noqa: BLE001 - an optimisation only: planning reports what is wrong with the recipe
        pass


def escape(text: str) -> str:
    from rich.markup import escape as esc  # a message may hold brackets: pip install 'gristmill[ray]'
    return esc(str(text))


class ConsoleObserver:
    """The pipeline's observer for the console: log lines indented, the run's table, the token summary."""

    def __init__(self, con):
        self.con = con

    def log(self, message: str) -> None:
        self.con.print(f"  {message}", highlight=False)

    def report(self, report: dict) -> None:
        print_report(report, self.con)

    def tokens(self, report: dict, html: str | None) -> None:
        from .tokenize.summary import print_summary
        print_summary(report, self.con)
        if html:
            self.con.print(f"report: {html}", highlight=False)


def print_error(e, con) -> int:
    """An error as one line, its brackets shown as text; its exit status: a ``PipelineError``'s own (an
    interruption in yellow, with how to resume), 2 for anything else (a refusal before any work)."""
    from .pipeline.errors import REFUSED, SIGINT, SIGTERM
    status = getattr(e, "status", REFUSED)
    if status in (SIGINT, SIGTERM):
        con.print(f"[yellow]{escape(e.message)}[/yellow]: {escape(e.hint)}", highlight=False)
    else:
        con.print(f"[red]error:[/red] {escape(e)}", highlight=False)
    return status


def run_guarded(fn, work_dir: str, con) -> tuple[int, object]:
    """``(0, fn())``, or an exit status and None after printing one line (``pipeline.run.guarded``'s
    statuses: 2 refused before it started, 1 failed, 130 / 143 interrupted, the work dir resumable)."""
    from .pipeline.run import guarded
    status, out = guarded(fn, f"rerun the same command to resume (work dir {work_dir})")
    if status:
        print_error(out, con)
        return status, None
    return 0, out


def _warn_np(np_: int, con) -> None:
    cores = os.cpu_count() or 1
    if np_ > 2 * cores:
        con.print(f"[yellow]warning:[/yellow] np={np_} is far above the {cores} CPU cores here: each worker is a "
                  f"process with its own memory; np={cores} is usually fastest", highlight=False)


def _positive_int(v: str) -> int:
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number ≥ 1, got {v!r}")
    return n


def _np_or_auto(v: str):
    return "auto" if v == "auto" else _positive_int(v)


def _ratio(v: str) -> float:
    try:
        x = float(v)
    except ValueError:
        x = -1
    if not 0 <= x <= 1:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, got {v!r}")
    return x


def print_report(report: dict, con=None) -> None:
    from rich.table import Table
    con = con or _console()
    t = Table(title=f"{report['project_name']}: {report['rows_read']:,} rows read → {report['rows_out']:,} rows out "
                    f"in {report['seconds']:.1f}s (np={report['np']})")
    for col in ("#", "op", "rows in", "rows out", "removed", "rejected", "seconds", "removed by reason"):
        t.add_column(col, justify="right" if col not in ("op", "removed by reason") else "left")
    for row in report["ops"]:
        reasons = ", ".join(f"{k}: {v:,}" for k, v in sorted(row["reasons"].items(), key=lambda kv: -kv[1])[:4])
        extra = f" (+{row['added']:,})" if row.get("added", 0) > 0 else \
            (f" (merged {-row['added']:,})" if row.get("added", 0) < 0 else "")
        op = f"{row['source']}: {row['op']}" if row.get("source") else row["op"]
        t.add_row("" if row["position"] is None else str(row["position"]), op, f"{row['rows_in']:,}",
                  f"{row['rows_out']:,}{extra}", f"{row['removed']:,}", f"{row['rejected']:,}",
                  f"{row['seconds']:.2f}", reasons)
    con.print(t)
    if report.get("sources"):
        print_sources(report, con)
    if report.get("exported_files"):
        con.print("exported: " + ", ".join(report["exported_files"]), highlight=False)
    if report.get("report_html"):
        con.print(f"report: {report['report_html']}", highlight=False)
    if report.get("rejects"):
        con.print(f"[yellow]{report['rejects']:,} rejected rows[/yellow] → {report['rejects_file']}", highlight=False)
        for r in report.get("reject_reasons", [])[:5]:
            con.print(f"  {r['count']:,} × {r['op']} {r['error_type']}: {r['example']}", highlight=False)


def print_sources(report: dict, con) -> None:
    """A multi-source run's funnel per source: rows read, after its own ops, rejected, at the end."""
    from rich.table import Table
    t = Table(title="per source")
    for col in ("source", "weight", "rows in", "after own ops", "rejected", "rows out"):
        t.add_column(col, justify="left" if col == "source" else "right")
    for s in report["sources"]:
        t.add_row(s["name"], f"{s['weight']:g}", f"{s['rows_in']:,}", f"{s['rows_after_source_ops']:,}",
                  f"{s['rejects']:,}", "" if s["rows_out"] is None else f"{s['rows_out']:,}")
    con.print(t)


def cmd_ops(args) -> int:
    from .registry import all_ops, closest, describe
    ops = all_ops()
    if args.name:
        if args.name not in ops:
            print(f"unknown op {args.name!r}{closest(args.name, ops)}", file=sys.stderr)
            return 2
        d = describe(ops[args.name])
        if args.json:
            print(json.dumps(d, indent=2, default=str))
            return 0
        print(f"{d['name']}  ({d['kind']})\n\n{d['doc']}\n\nparams:")
        for p in d["params"]:
            default = "required" if p["required"] else f"default {p['default']!r}"
            print(f"  {p['name']}: {p['type']} ({default})\n      {p['description']}")
        return 0
    if args.json:
        print(json.dumps({n: describe(c) for n, c in ops.items()}, indent=2, default=str))
        return 0
    from rich.console import Console
    from rich.table import Table
    from .opsdoc import default_text, summary
    # a terminal's width, or COLUMNS when set (a pipe without it: 200)
    con = Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit() else 200)
    with_params = con.width >= 160  # narrower: names and summaries (`gristmill ops NAME` has the params)
    from rich import box
    t = Table(title=f"{len(ops)} ops" + ("" if with_params else " (params: gristmill ops NAME)"),
              box=box.SIMPLE_HEAD)
    t.add_column("op", no_wrap=True, min_width=max(map(len, ops), default=2))
    t.add_column("kind", no_wrap=True)
    if with_params:
        t.add_column("params", ratio=1)
    t.add_column("summary", ratio=1 if with_params else None, overflow="fold")  # a long word folds, never cut
    for n, c in ops.items():
        d = describe(c)
        row = [n, d["kind"]]
        if with_params:
            row.append(escape(", ".join(f"{p['name']}={default_text(p['default'])}" for p in d["params"]
                                        if p["name"] != "text_key")))
        t.add_row(*row, escape(summary(d["doc"]).replace("``", "`")))
    con.print(t)
    return 0


def cmd_formats(args) -> int:
    from .io.base import readers
    for r in sorted(readers().values(), key=lambda r: r.name):
        print(f"{r.name}: {', '.join(r.extensions) or '(directories)'}")
        for k, d in r.options.items():
            print(f"    reader_params.{k}: {d}")
    return 0


def cmd_head(args) -> int:
    from .dataset import Dataset
    params = {"txt_mode": args.txt_mode} if args.txt_mode else {}
    for kv in args.reader_param:
        key, _, value = kv.partition("=")
        params[key] = value
    # rows without the text field are rows too (Baike/Zhihu/BELLE shapes, made into text by a recipe's first
    # op): the text is required only when a --text-key other than the default is asked for
    text_optional = args.text_key == D.TEXT_KEY
    try:
        check_format(args.path, args.format)
        rows = Dataset.load(args.path, text_key=args.text_key, format=args.format,
                            **params).head(args.n, text_optional=text_optional)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for r in rows:
        if text_optional and r.get(args.text_key, "") is None:
            del r[args.text_key]  # the reader holds a row without the text as a null text: show the row as it is
        if args.width and isinstance(r.get(args.text_key), str) and len(r[args.text_key]) > args.width:
            r[args.text_key] = r[args.text_key][: args.width] + "…"
        print(json.dumps(r, ensure_ascii=False, default=str))
    return 0


# formats that read each other's files (a JSON Lines file named .json and the reverse)
_SAME_FORMAT = ({"json", "jsonl"},)


def check_format(path: str, fmt: str | None) -> None:
    """ValueError when ``--format fmt`` names another format than the one the input's files are (by their
    extension): reading Parquet as JSONL or JSONL as CSV gives garbage or nothing. Files whose extension
    names no format, or plain text (.txt), can be read as any format."""
    if not fmt:
        return
    import glob
    from .io.base import reader_for
    try:
        asked = reader_for(path, fmt).name
    except ValueError:
        return  # an unknown --format: the reader says so
    files = [path] if os.path.isfile(path) else [f for f in sorted(glob.glob(path))[:100] if os.path.isfile(f)]
    for f in files:
        try:
            found = reader_for(f).name
        except ValueError:
            continue
        if found in (asked, "txt") or any({found, asked} <= s for s in _SAME_FORMAT):
            continue
        raise ValueError(f"--format {asked} does not match {f}: its extension says {found}; drop --format (the "
                         f"{found} reader is picked from the extension) or give a {asked} file")


def cmd_analyze(args) -> int:
    """Compute the filters' stats over a dataset without removing anything (gristmill/analysis/app.py)."""
    from .analysis.app import plan_analysis, run_analysis
    from .pipeline import PipelineError
    con = _console()
    params = {"txt_mode": args.txt_mode} if args.txt_mode else {}
    for kv in args.reader_param:
        key, _, value = kv.partition("=")
        params[key] = value
    try:
        if not args.target.endswith((".yaml", ".yml")):
            check_format(args.target, args.format)
        plan = plan_analysis(args.target, ops=args.ops, what_if=args.what_if, np=args.np, work_dir=args.work_dir,
                             engine=args.engine, address=args.address, progress=not args.no_progress,
                             allow_scripts=args.allow_scripts, text_key=args.text_key, input_format=args.format,
                             reader_params=params)
    except (PipelineError, ValueError) as e:
        return print_error(e, con)
    for w in plan.warnings:
        con.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    for n in plan.notes:
        con.print(escape(n), highlight=False)
    _warn_np(plan.cfg.np, con)
    con.print(f"[bold]{escape(plan.describe())}[/bold]", highlight=False)
    status, res = run_guarded(lambda: run_analysis(plan, what_if=args.what_if, k=args.k,
                                                   log=lambda m: con.print(f"  {m}", highlight=False)),
                              plan.cfg.work_dir, con)
    if res is None:
        return status
    if not plan.sources:
        print_analysis(res, con)
        return 0
    for name, one in res["sources"].items():
        con.print(f"[bold]source {escape(name)}[/bold]", highlight=False)
        print_analysis(one, con)
    if res["mix"] is not None:
        con.print("[bold]over the mix[/bold] (the shared filters over every source's rows)", highlight=False)
        print_analysis(res["mix"], con)
    else:
        con.print(f"no analysis over the mix: {res['mix_skipped']}", highlight=False)
    return 0


def print_analysis(res: dict, con) -> None:
    from rich.table import Table
    model = res["model"]
    ov = model["overall"]
    t = Table(title=f"{res['report']['rows_read']:,} rows analysed in {res['report']['seconds']:.1f}s")
    t.add_column("stat")
    for lab in ov["labels"]:
        t.add_column(lab, justify="right")
    for name, col in ov["columns"].items():
        t.add_row(name, *[_fmt(col.get(lab)) for lab in ov["labels"]])
    con.print(t)
    if model.get("suggestions"):
        s = Table(title=f"k-sigma suggestions (mean ± {model['suggestions'][0]['k']:g}·std)")
        for c in ("op", "param", "stat", "current", "suggested"):
            s.add_column(c)
        for x in model["suggestions"]:
            s.add_row(x["op"], x["param"], x["stat"], _fmt(x["current"]), _fmt(x["suggested"]))
        con.print(s)
    for w in model.get("what_if") or []:
        if w.get("combined"):
            con.print(f"what if all {len(w.get('changes') or [])} changes together: all filters keep "
                      f"{w['kept_after']:,} of {w['rows']:,} (was {w['kept_before']:,})", highlight=False)
            continue
        kept = w["kept_alone"] if w.get("kept_alone") is not None else w["kept_after"]  # (this change alone)
        con.print(f"what if {w['param']} {_fmt(w['from'])} → {_fmt(w['to'])}: it removes {w['removed_after']:,} rows "
                  f"alone (was {w['removed_before']:,}, {w['removed_after'] - w['removed_before']:+,}); all filters "
                  f"keep {kept:,} of {w['rows']:,} (was {w['kept_before']:,})", highlight=False)
    con.print(f"overall: {res['overall']}\nstats:   {res['stats']}\nreport:  {res['html']}", highlight=False)


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e6 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def cmd_split(args) -> int:
    """Re-shard a dataset into N JSONL files of about equal size (see gristmill/io/split.py)."""
    from .engine.paths import RunRefused, check_outputs
    from .io.base import ReadOptions, check_reader_params
    from .io.planner import plan_dataset
    from .io.split import SplitRefused, compression_of, part_names, split_dataset
    con = _console()
    params = {"txt_mode": args.txt_mode} if args.txt_mode else {}
    for kv in args.reader_param:
        key, _, value = kv.partition("=")
        params[key] = value
    try:
        opts = ReadOptions(text_key=args.text_key, params=tuple(sorted(check_reader_params(params).items())))
        for path in args.paths:
            check_format(path, args.format)
        comp = compression_of(args.compression)
        names = part_names(args.output, args.n, comp, args.prefix)
        shards = plan_dataset(list(args.paths), opts, args.format)
        try:  # never over or inside the input (the output directory is checked as a run's work dir is)
            check_outputs(list(args.paths), [f for s in shards for f in (s.source, *s.files)], names[0],
                          args.output, names)
        except RunRefused as e:
            raise RunRefused(str(e).replace("work dir", "output directory", 1).replace("export_path", "output", 1))
        res = split_dataset(list(args.paths), args.output, args.n, opts, args.format, comp, args.prefix,
                            log=lambda m: con.print(f"  {m}", highlight=False))
    except (SplitRefused, RunRefused, FileNotFoundError, ValueError) as e:
        return print_error(e, con)
    for f in res["files"]:
        print(f"{f['path']}\t{f['rows']:,} rows\t{f['bytes'] / 1e6:,.1f} MB")
    con.print(f"{res['rows']:,} rows in {len(res['files'])} files", highlight=False)
    if res["rejects"] or res["file_errors"]:
        con.print(f"[yellow]warning:[/yellow] {res['rejects']:,} record(s) rejected by the reader"
                  + (f", {res['file_errors']} file error(s) (truncated or unreadable)" if res["file_errors"] else "")
                  + f": not in the parts, listed in {res['rejects_file']}", highlight=False)
    return 0


def cmd_tokenize(args) -> int:
    """Tokenize a recipe's export (its `tokenize:` section) or a file that is just a tokenize section."""
    _start_tokenize_workers_early(args)
    from .pipeline import PipelineError
    from .pipeline.tokenize_step import plan_tokenize
    con = _console()
    try:
        job = plan_tokenize(args.recipe, np=args.np, work_dir=args.work_dir, engine=args.engine,
                            address=args.address)
    except PipelineError as e:
        return print_error(e, con)
    status, report = run_guarded(lambda: job.run(progress=not args.no_progress,
                                                 log=lambda m: con.print(f"  {m}", highlight=False)),
                                 job.work_dir, con)
    if report is not None:
        if args.json:
            print(json.dumps(report, indent=2, default=str))
        from .analysis.report import add_tokens
        ConsoleObserver(con).tokens(report, add_tokens(job.work_dir, report["stats"]))  # the run report gains them
    return status


def _start_tokenize_workers_early(args) -> None:
    """`tokenize --np N` (N > 1, local engine): start its workers' fork server now, while this process imports
    and plans, as `run` does above (a guess that the run does not use costs some CPU, never a result)."""
    try:
        if (args.np or 0) > 1 and (args.engine or "local") == "local":
            from .engine.pool import start_server
            from .tokenize import WORKER_MODULES
            start_server(args.np, WORKER_MODULES)
    except Exception:  # noqa: BLE001 - an optimisation only
        pass


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    p = argparse.ArgumentParser(prog="gristmill", description="Raw corpora → training-ready data.")
    p.add_argument("--version", action="version", version=f"gristmill {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a YAML recipe")
    r.add_argument("recipe")
    r.add_argument("--np", type=_np_or_auto, default=None,
                   help="worker processes, or 'auto' (from the cores, the memory and a probe; overrides the recipe)")
    r.add_argument("--engine", choices=["local", "ray"], default=None,
                   help="where to run (overrides the recipe's executor_type; default local)")
    r.add_argument("--address", default=None, help="Ray cluster to join: auto or HOST:PORT (with --engine ray)")
    r.add_argument("--max-reject-ratio", type=_ratio, default=None,
                   help="exit 1 when more than this share of rows is rejected (overrides the recipe; default "
                        f"{D.MAX_REJECT_RATIO})")
    r.add_argument("--work-dir", default=None, help="work directory (resume state, report, rejects)")
    r.add_argument("--allow-scripts", action="store_true", help="allow ops that run user Python code")
    r.add_argument("--no-progress", action="store_true")
    r.set_defaults(fn=cmd_run)
    o = sub.add_parser("ops", help="list ops, or show one")
    o.add_argument("name", nargs="?")
    o.add_argument("--json", action="store_true", help="machine-readable (incl. JSON schema of params)")
    o.set_defaults(fn=cmd_ops)
    h = sub.add_parser("head", help="show the first samples of a dataset")
    h.add_argument("path")
    h.add_argument("-n", type=int, default=5)
    h.add_argument("--text-key", default=D.TEXT_KEY)
    h.add_argument("--format", default=None)
    h.add_argument("--txt-mode", default=None, choices=["file", "line"])
    h.add_argument("-p", "--reader-param", action="append", default=[], metavar="KEY=VALUE",
                   help="reader option (see `gristmill formats`), e.g. -p mime_types=*")
    h.add_argument("--width", type=int, default=300, help="truncate text to this many characters (0: no limit)")
    h.set_defaults(fn=cmd_head)
    f = sub.add_parser("formats", help="list input formats, their extensions and reader options")
    f.set_defaults(fn=cmd_formats)
    sp = sub.add_parser("split", help="re-shard a dataset into N JSONL files of about equal size")
    sp.add_argument("paths", nargs="+", metavar="PATH", help="files, directories or globs (any readable format)")
    sp.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="where the parts go")
    sp.add_argument("-n", type=_positive_int, required=True, help="number of files")
    sp.add_argument("--compression", default="none", choices=["none", "gz", "zst"], help="of the parts")
    sp.add_argument("--prefix", default="part", help="file name prefix (PREFIX-00000-of-0000N.jsonl)")
    sp.add_argument("--text-key", default=D.TEXT_KEY)
    sp.add_argument("--format", default=None, help="force a reader (see `gristmill formats`)")
    sp.add_argument("--txt-mode", default=None, choices=["file", "line"])
    sp.add_argument("-p", "--reader-param", action="append", default=[], metavar="KEY=VALUE",
                    help="reader option (see `gristmill formats`)")
    sp.set_defaults(fn=cmd_split)
    t = sub.add_parser("tokenize", help="tokenize, pack and write training data (recipe `tokenize:` section)")
    t.add_argument("recipe")
    t.add_argument("--np", type=_positive_int, default=None, help="worker processes (overrides the recipe)")
    t.add_argument("--work-dir", default=None, help="work directory (a recipe's: the one `gristmill run` used)")
    t.add_argument("--engine", choices=["local", "ray"], default=None,
                   help="where phase 1 runs (overrides the recipe's executor_type; default local)")
    t.add_argument("--address", default=None, help="Ray cluster to join: auto or HOST:PORT (with --engine ray)")
    t.add_argument("--no-progress", action="store_true")
    t.add_argument("--json", action="store_true",
                   help="also print the full report as JSON on stdout (always written to <output>/report.json)")
    t.set_defaults(fn=cmd_tokenize)
    a = sub.add_parser("analyze", help="compute the stats of a recipe's filters (or --ops) over a dataset, removing "
                                       "nothing: overall.csv, stats.parquet, report.html, k-sigma and what-if")
    a.add_argument("target", help="a recipe (.yaml: its filters, its dataset) or a dataset path")
    a.add_argument("--ops", action="append", default=[], metavar="OP",
                   help="a filter to analyze, NAME or 'NAME: {param: value}' (repeatable; replaces the recipe's; "
                        "default for a dataset: Data-Juicer's cheap text stats)")
    a.add_argument("--what-if", action="append", default=[], metavar="OP.PARAM=VALUE",
                   help="rows removed with a changed threshold, from the cached stats (repeatable)")
    a.add_argument("--k", type=float, default=3.0, help="k of the k-sigma threshold suggestions (default 3)")
    a.add_argument("--np", type=_positive_int, default=None, help="worker processes")
    a.add_argument("--work-dir", default=None, help="work directory (the analysis goes to WORK/analysis/)")
    a.add_argument("--engine", choices=["local", "ray"], default=None)
    a.add_argument("--address", default=None, help="Ray cluster to join (with --engine ray)")
    a.add_argument("--text-key", default=D.TEXT_KEY)
    a.add_argument("--format", default=None, help="force a reader (see `gristmill formats`)")
    a.add_argument("--txt-mode", default=None, choices=["file", "line"])
    a.add_argument("-p", "--reader-param", action="append", default=[], metavar="KEY=VALUE")
    a.add_argument("--allow-scripts", action="store_true")
    a.add_argument("--no-progress", action="store_true")
    a.set_defaults(fn=cmd_analyze)
    sv = sub.add_parser("serve", help="the REST API and web UI (binds 127.0.0.1 unless given --host and --token)")
    from .service.server import add_arguments as _serve_args
    _serve_args(sv)
    sv.set_defaults(fn=lambda a: __import__("gristmill.service.server", fromlist=["x"]).cmd_serve(a))
    mc = sub.add_parser("mcp", help="the MCP server for agents (stdio or streamable HTTP)")
    from .service.mcp_server import add_arguments as _mcp_args
    _mcp_args(mc)
    mc.set_defaults(fn=lambda a: __import__("gristmill.service.mcp_server", fromlist=["x"]).cmd_mcp(a))
    wu = sub.add_parser("warm-up", help="compile the numba kernels once after an install (parallel; runs then load them)")
    wu.add_argument("recipe", nargs="?", help="only this recipe's kernel ops, with its params (default: all of them)")
    wu.add_argument("-j", "--jobs", type=int, default=None, help="worker processes (default: one per core)")
    wu.set_defaults(fn=lambda a: __import__("gristmill.pipeline.warmup", fromlist=["x"]).cmd_warm_up(a))
    ins = sub.add_parser("inspect", help="browse samples of a dataset in the terminal, filtered by a stat expression")
    from .analysis.inspect import add_arguments as _inspect_args
    _inspect_args(ins)
    ins.set_defaults(fn=lambda a: __import__("gristmill.analysis.inspect", fromlist=["x"]).cmd_inspect(a))
    try:
        from .web.download_cli import add_download_command
        add_download_command(sub)
    except ImportError:
        pass
    from .models_cli import add_models_command
    add_models_command(sub)
    from .classify_cli import add_classify_command
    add_classify_command(sub)
    return p


def main(argv=None) -> int:
    from .core import lazy_pandas
    from .engine.interrupt import Interrupted, signals_raise
    from .engine.timeline import mark
    mark("cli main")
    lazy_pandas.defer()  # pyarrow's pa.array imports pandas, which gristmill's own work never needs
    try:
        with signals_raise():  # from the start: an interrupt during imports is one line too
            args = build_parser().parse_args(argv)
            return args.fn(args)
    except (Interrupted, KeyboardInterrupt) as e:
        print(f"interrupted ({e or 'SIGINT'})", file=sys.stderr)
        return e.exit_status if isinstance(e, Interrupted) else 130


def entry() -> None:
    """The ``gristmill`` command: :func:`main`, then out without the interpreter's teardown. Freeing every
    module, kernel and Arrow buffer one by one took ~0.8 s after a run's last output (issue 25: time after
    the engine that no user waits for willingly). Threads are joined and exit handlers run (Ray's shutdown,
    logging's flush, the fork servers' reaping) as at a normal exit; only the object-by-object teardown is
    skipped. An exception leaves the normal way, with its traceback."""
    rc = main()
    from .engine.timeline import mark
    mark("main returned")
    import atexit
    import threading
    threading._shutdown()  # what a normal exit does first: wait for non-daemon threads
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(rc if isinstance(rc, int) else 0 if rc is None else 1)


if __name__ == "__main__":
    entry()
