"""`gristmill inspect PATH`: browse a dataset's samples in the terminal, filtered by an expression.

    gristmill inspect out.jsonl --where "__stats__.num_words < 50" -n 10
    gristmill inspect data/ --where "meta.lang == 'en' and len(text) > 2000" -i
    gristmill inspect WORK/removed/03-word_repetition_filter.jsonl --where "row.__stats__.num_words > 1000"
    gristmill inspect out.parquet --where "'lorem' in text.lower()" --json -n 0 > matches.jsonl

PATH is anything ``gristmill run`` reads (JSONL/.gz/.zst, Parquet, CSV, text, HF arrow dirs, WARC…;
``--format``, ``--text-key``, ``--txt-mode`` and ``-p KEY=VALUE`` reader options work as for
``gristmill head``). The data is streamed: reading stops as soon as ``-n`` matches (default 10; 0 = all)
have been shown, so a filter that matches early returns at once on a huge file. Each match is a panel
with its id and position (file and row number), its text (``--width`` characters; 0 = all) and its
other fields, ``__stats__`` and ``__meta__`` shown as ``name=value``; ``--fields a,b`` shows only those
fields, ``--json`` prints each matching row as one JSON line, exactly as read (for scripts), ``--skip K``
passes over the first K matches. A summary ("N matching of M rows read", and whether the scan stopped
early) goes to stderr. ``-i`` pages through matches one at a time: Enter or ``n`` next, ``p`` / ``b``
previous, ``/EXPR`` a new filter from here on (``/`` alone: none), ``?`` help, ``q`` quit.

The --where expression language
-------------------------------
Python syntax, parsed with `ast` (never run by Python) into column operations over Arrow batches.

Fields
  text, id, reason                  a top-level field (in a WORK/removed/NN-op.jsonl file, a field
                                    the record lacks is read from its row: text, stats.num_words)
  __stats__.num_words               a nested field (struct or JSON object), at any depth, e.g.
                                    row.__stats__.num_words in a WORK/removed/NN-op.jsonl file
  stats.num_words, meta.lang        shorthands for __stats__.* / __meta__.* (Data-Juicer's
                                    __dj__stats__.* / __dj__meta__.* work too)
  field("odd name")                 a field whose name is not a Python name (dots still nest)
Values
  42  -0.5  "str"  'str'  True  False  None
Operators
  ==  !=  <  <=  >  >=              comparisons; they chain: 10 <= stats.num_words < 50
  and  or  not  ( )
  +  -  *  /  //  %                 arithmetic (/ is true division); + also joins strings
  x is None, x is not None          the value is missing (key absent, or null)
  x in [1, 2], x not in ("a", "b")  membership in a literal list
  "word" in text                    substring; or an element of a list field: "en" in meta.langs
Functions and methods
  len(x)                            length of a string (in characters) or of a list
  abs(x)
  x.lower()  x.upper()  x.strip()
  x.startswith("ab")  x.endswith(("a", "b"))  x.contains("ab")
  x.matches("regex"), re("regex", x)    regular-expression search (RE2 syntax)
Missing values
  A comparison with a missing value is False: x != 5 and x < 5 both skip rows without x, while
  not (x == 5) keeps them; x in [...] and x not in [...] are both False for a missing x (unless the
  list holds None). Arithmetic with a missing value gives a missing value. As a condition, a value is
  true as in Python (non-zero, non-empty) and a missing one is false.
Errors (exit status 2)
  A name the data does not have (checked on the first batch read) names the closest field; a syntax
  error shows its column; comparing values that do not compare (a string with a number) says which.
"""
from __future__ import annotations

import argparse

DEFAULT_N = 10
DEFAULT_WIDTH = 500
HISTORY = 100  # matches kept for `p` in interactive mode
HELP = ("commands: Enter or n = next match, p or b = previous, /EXPR = filter with EXPR from here on "
        "(/ alone: no filter), ? = this help, q = quit")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..core import defaults as D
    p.description = "Browse a dataset's samples in the terminal, filtered by a --where expression."
    if __doc__:  # the expression language, as the help's epilog
        p.formatter_class = argparse.RawDescriptionHelpFormatter
        p.epilog = __doc__[__doc__.index("The --where expression language"):]
    p.add_argument("path", help="file, directory or glob (any readable format)")
    p.add_argument("-w", "--where", default=None, metavar="EXPR",
                   help="show only rows where EXPR is true, e.g. \"stats.num_words < 50 and meta.lang == 'en'\" "
                        "(see the docstring of gristmill/analysis/inspect.py for the language)")
    p.add_argument("-n", type=int, default=None, metavar="N",
                   help=f"show at most N matches, then stop reading (default {DEFAULT_N}; 0: all; "
                        "no limit with --interactive)")
    p.add_argument("--skip", type=int, default=0, metavar="K", help="pass over the first K matches")
    p.add_argument("--fields", default=None, metavar="A,B",
                   help="show only these fields (dotted names: stats.num_words,meta.lang)")
    p.add_argument("--width", type=int, default=DEFAULT_WIDTH,
                   help=f"truncate text to this many characters (default {DEFAULT_WIDTH}; 0: no limit)")
    p.add_argument("--json", action="store_true", help="print matching rows as JSON lines (exactly as read)")
    p.add_argument("-i", "--interactive", action="store_true",
                   help="page through matches: Enter/n next, p previous, /EXPR new filter, ? help, q quit")
    p.add_argument("--text-key", default=D.TEXT_KEY)
    p.add_argument("--format", default=None, help="force a reader (see `gristmill formats`)")
    p.add_argument("--txt-mode", default=None, choices=["file", "line"])
    p.add_argument("-p", "--reader-param", action="append", default=[], metavar="KEY=VALUE",
                   help="reader option (see `gristmill formats`), e.g. -p mime_types=*")


def cmd_inspect(args) -> int:
    import os
    import sys
    try:
        return _Inspect(args).run()
    except BrokenPipeError:  # `gristmill inspect ... | head`: quiet, and no second error at exit
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0


def _err(msg: str) -> None:
    import sys
    print(msg, file=sys.stderr, flush=True)


class _Match:
    __slots__ = ("row", "synthetic_id", "source", "rowno", "k")

    def __init__(self, row: dict, synthetic_id: bool, source: str, rowno: int, k: int):
        self.row, self.synthetic_id, self.source, self.rowno, self.k = row, synthetic_id, source, rowno, k


class _Scanner:
    """Matching rows of a dataset, streamed: batches are read only as matches are asked for."""

    def __init__(self, shards, opts, pred, check: dict | None = None):
        import numpy as np
        self.np = np
        self.shards, self.opts, self.pred = shards, opts, pred
        self.check = check  # --fields names to check against the first batch
        self.batch = None
        self.shard = self.first = None
        self.synthetic = False
        self.hits = np.empty(0, np.int64)
        self.hit_i = self.base = self.pos = 0
        self.rejects = self.found = 0
        self.exhausted = False
        self.checked = False
        self._gen = self._batches()

    @property
    def rows_read(self) -> int:
        return self.base + self.pos

    def _batches(self):
        import pyarrow as pa
        from ..io.formats import read_shard
        seen: dict[str, int] = {}
        for s in self.shards:
            for item in read_shard(s, self.opts):
                if isinstance(item, pa.RecordBatch):
                    if item.num_rows:
                        first = seen.get(s.source, 0)
                        seen[s.source] = first + item.num_rows
                        yield item, s, first
                else:
                    self.rejects += 1

    def close(self) -> None:
        self._gen.close()

    def _load(self) -> bool:
        if self.batch is not None:
            self.base += self.batch.num_rows
            self.batch, self.pos = None, 0
        nxt = next(self._gen, None)
        if nxt is None:
            self.exhausted = True
            return False
        self.batch, self.shard, self.first = nxt
        self.pos = 0
        self.synthetic = _synthetic_id(self.batch, self.shard, self.opts)
        if self.check:
            from .where import check_fields
            check_fields(self.batch, self.check, None, "--fields")
            self.check = None
        self._filter()
        return True

    def _filter(self) -> None:
        np = self.np
        n = self.batch.num_rows
        if self.pred is None:
            hits = np.arange(self.pos, n)
        else:
            if not self.checked:
                self.pred.check_fields(self.batch)
                self.checked = True
            hits = np.flatnonzero(self.pred.mask(self.batch))
            hits = hits[hits >= self.pos]
        self.hits, self.hit_i = hits, 0

    def next(self) -> _Match | None:
        while True:
            if self.batch is not None and self.hit_i < len(self.hits):
                i = int(self.hits[self.hit_i])
                self.hit_i += 1
                self.pos = i + 1
                self.found += 1
                return self._match(i)
            if self.batch is not None:
                self.pos = self.batch.num_rows
            if self.exhausted or not self._load():
                return None

    def _match(self, i: int) -> _Match:
        from ..core import columns as C
        from ..io.base import relative_source
        row = C.to_pylist(self.batch.slice(i, 1))[0]
        return _Match(row, self.synthetic, relative_source(self.shard.source, self.opts), self.first + i + 1,
                      self.found)

    def set_filter(self, pred) -> None:
        """Match ``pred`` (None: every row) from the current position on; the old filter stays when
        the new one does not apply to the data (WhereError)."""
        old = (self.pred, self.checked, self.hits, self.hit_i, self.found)
        self.pred, self.checked, self.found = pred, False, 0
        try:
            if self.batch is not None:
                self._filter()
        except Exception:
            self.pred, self.checked, self.hits, self.hit_i, self.found = old
            raise


def _synthetic_id(batch, shard, opts) -> bool:
    """Whether the batch's ``id`` column was made by the reader (``source:position``), not read."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from ..core import columns as C
    from ..io.base import relative_source
    names = batch.schema.names
    if not names or names[-1] != C.ID or batch.schema.field(C.ID).metadata:
        return False
    col = batch.column(C.ID)
    if not pa.types.is_string(col.type):
        return False
    prefix = relative_source(shard.source, opts) + ":"
    if not pc.all(pc.starts_with(col, prefix)).as_py():
        return False
    return bool(pc.all(pc.utf8_is_digit(pc.utf8_slice_codeunits(col, len(prefix)))).as_py())


_MISSING = object()


def _lookup(row: dict, key: str):
    """A dotted field of a row dict (``stats.x`` / ``meta.x`` shorthands, Data-Juicer aliases)."""
    v = _lookup_in(row, key)
    if v is _MISSING and isinstance(row.get("row"), dict) and "reason" in row:  # a removed-samples record
        v = _lookup_in(row["row"], key)
    return v


def _lookup_in(row: dict, key: str):
    from ..core import columns as C
    if key in row:
        return row[key]
    parts = key.split(".")
    head = C.ALIASES.get(parts[0], parts[0])
    if head not in row:
        head = {"stats": C.STATS, "meta": C.META}.get(head, head)
    v = row.get(head, _MISSING)
    for p in parts[1:]:
        v = v.get(p, _MISSING) if isinstance(v, dict) else _MISSING
    return v


def _dumps(value) -> str:
    import base64
    import json
    from ..core import columns as C
    try:
        return C.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                          default=lambda v: base64.b64encode(v).decode() if isinstance(v, bytes) else str(v))


class _Inspect:
    def __init__(self, args):
        self.args = args
        self.fields = [f.strip() for f in args.fields.split(",") if f.strip()] if args.fields else None
        self.limit = args.n if args.n is not None else (0 if args.interactive else DEFAULT_N)
        self._console = None

    # -- setup ----------------------------------------------------------------------------------------

    def _open(self):
        from dataclasses import replace
        from ..io.base import ReadOptions, check_reader_params
        from ..io.planner import common_root, plan_dataset
        a = self.args
        params = {"txt_mode": a.txt_mode} if a.txt_mode else {}
        for kv in a.reader_param:
            key, sep, value = kv.partition("=")
            if not sep:
                raise ValueError(f"-p takes KEY=VALUE, not {kv!r}")
            params[key] = value
        opts = ReadOptions(text_key=a.text_key, params=tuple(sorted(check_reader_params(params).items())),
                           text_optional=True)  # rows without a text (a removed-samples file) are rows too
        shards = plan_dataset(a.path, opts, a.format)
        return shards, replace(opts, root=common_root(shards))

    def run(self) -> int:
        from .where import WhereError, compile_where
        a = self.args
        if self.limit < 0 or a.skip < 0:
            _err("error: -n and --skip take a number >= 0")
            return 2
        try:
            pred = compile_where(a.where) if a.where is not None else None
            shards, opts = self._open()
        except WhereError as e:
            for line in e.lines():
                _err(line)
            return 2
        except (FileNotFoundError, NotADirectoryError, ValueError) as e:
            _err(f"error: {e}")
            return 2
        scanner = _Scanner(shards, opts, pred, {f: 0 for f in self.fields} if self.fields else None)
        try:
            return self._interactive(scanner) if a.interactive else self._batch(scanner)
        except WhereError as e:
            for line in e.lines():
                _err(line)
            return 2
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as e:
            _err(f"error: {type(e).__name__}: {e}")
            return 1
        finally:
            scanner.close()

    # -- output ---------------------------------------------------------------------------------------

    def _skip(self, scanner) -> None:
        for _ in range(self.args.skip):
            if scanner.next() is None:
                break

    def _batch(self, scanner) -> int:
        self._skip(scanner)
        shown = 0
        while not self.limit or shown < self.limit:
            m = scanner.next()
            if m is None:
                break
            self.show(m)
            shown += 1
        early = not scanner.exhausted
        self.summary(scanner, early)
        return 0

    def summary(self, scanner, early: bool) -> None:
        a = self.args
        rows = scanner.rows_read
        if scanner.found == 0:
            what = f"no rows match {a.where!r}" if scanner.pred is not None else "no rows"
            msg = f"{what} ({rows:,} rows read)"
        else:
            msg = f"{scanner.found:,} matching of {rows:,} rows read"
            notes = []
            if a.skip and not a.interactive:
                notes.append(f"first {min(a.skip, scanner.found):,} skipped")
            if early:
                notes.append("stopped early: the rest was not read")
            if notes:
                msg += f" ({'; '.join(notes)})"
        if scanner.rejects:
            msg += f"; {scanner.rejects:,} unreadable record(s) skipped"
        _err(msg)

    @property
    def console(self):
        if self._console is None:
            import sys
            from rich.console import Console
            self._console = Console(width=None if sys.stdout.isatty() else 120, highlight=False, markup=False,
                                    emoji=False)
            self._console.on_broken_pipe = _broken_pipe  # (rich would exit 1)
        return self._console

    def show(self, m: _Match) -> None:
        import sys
        row = m.row
        if self.args.json:
            if self.fields:
                out = {k: v for k in self.fields if (v := _lookup(row, k)) is not _MISSING}
            else:
                out = {k: v for k, v in row.items() if not (m.synthetic_id and k == "id")}
            sys.stdout.write(_dumps(out) + "\n")
            sys.stdout.flush()
            return
        self.console.print(self.panel(m))

    def _trunc(self, s: str) -> str:
        w = self.args.width
        if w and len(s) > w:
            return s[:w] + f"… (+{len(s) - w:,} chars)"
        return s

    def _value(self, v) -> str:
        if isinstance(v, str):
            s = v
        elif isinstance(v, float):
            s = r if len(r := repr(v)) <= 10 else f"{v:.6g}"
        elif v is _MISSING:
            s = "(absent)"
        else:
            s = _dumps(v)
        return _clean(self._trunc(s))

    def _kv(self, d: dict) -> str:
        return "  ".join(f"{k}={self._value(v)}" for k, v in d.items())

    def panel(self, m: _Match):
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text
        from ..core import columns as C
        row, tk = m.row, self.args.text_key
        holder = row if isinstance(row.get(tk), str) else \
            row.get("row") if isinstance(row.get("row"), dict) and isinstance(row["row"].get(tk), str) else None
        sid = row.get("id")
        if m.synthetic_id and holder is not None and holder is not row and "id" in holder:
            sid = holder["id"]
        pos = f"{m.source} row {m.rowno:,}"
        title = Text.assemble((pos, "bold"), (f"  id {_clean(str(sid))}", "dim")) if sid == row.get("id") \
            and m.synthetic_id else Text.assemble((_clean(str(sid)), "bold"), (f"  {pos}", "dim"))
        table = Table.grid(padding=(0, 2))
        table.add_column(style="cyan", no_wrap=True)
        table.add_column()
        parts = []
        if self.fields:
            for k in self.fields:
                v = _lookup(row, k)
                table.add_row(k, Text(self._kv(v) if isinstance(v, dict) and _is_ns(k) else self._value(v)))
        else:
            if holder is not None:
                parts.append(Text(_clean(self._trunc(holder[tk]))))
            self._rows(table, row, "", holder, tk, C)
        if table.row_count:
            if parts:
                parts.append(Text(""))
            parts.append(table)
        return Panel(Group(*parts), title=title, title_align="left", subtitle=f"match {m.k:,}",
                     subtitle_align="right")

    def _rows(self, table, d: dict, prefix: str, holder, tk: str, C) -> None:
        from rich.text import Text
        for k, v in d.items():
            if d is holder and k == tk:
                continue
            if not prefix and k == "id":
                continue
            name = C.ALIASES.get(k, k)
            if name in (C.STATS, C.META) and isinstance(v, dict):
                table.add_row(prefix + ("stats" if name == C.STATS else "meta"), Text(self._kv(v)))
            elif isinstance(v, dict) and v is holder:
                self._rows(table, v, f"{prefix}{k}.", holder, tk, C)
            else:
                table.add_row(prefix + k, Text(self._value(v)))

    # -- interactive ----------------------------------------------------------------------------------

    def _interactive(self, scanner) -> int:
        import sys
        from .where import WhereError, compile_where
        self._skip(scanner)
        history: list[_Match] = []
        idx = -1

        def forward() -> bool:
            nonlocal idx
            if idx + 1 < len(history):
                idx += 1
            else:
                if self.limit and len(history) and history[-1].k >= self.limit + self.args.skip:
                    _err(f"-n {self.limit} reached")
                    return False
                m = scanner.next()
                if m is None:
                    return False
                history.append(m)
                if len(history) > HISTORY:
                    del history[0]
                idx = len(history) - 1
            self.show(history[idx])
            return True

        if not forward():
            self.summary(scanner, False)
            return 0
        while True:
            sys.stderr.write("[n]ext [p]rev /filter [?] [q]uit > ")
            sys.stderr.flush()
            line = sys.stdin.readline()
            if not line:
                break
            cmd = line.strip()
            if cmd in ("", "n", "next"):
                if not forward():
                    _err(f"no more matches ({scanner.rows_read:,} rows read)" if scanner.exhausted
                         else "no more matches")
            elif cmd in ("p", "b", "prev", "back"):
                if idx > 0:
                    idx -= 1
                    self.show(history[idx])
                else:
                    _err("at the first match kept" if history else "no match yet")
            elif cmd in ("q", "quit", "exit"):
                break
            elif cmd.startswith("/"):
                expr = cmd[1:].strip()
                try:
                    scanner.set_filter(compile_where(expr) if expr else None)
                except WhereError as e:
                    for ln in e.lines():
                        _err(ln)
                    continue
                self.args.where = expr or None
                history, idx = history[: idx + 1], idx  # what follows comes under the new filter
                self.limit = 0
                _err(f"filter: {expr}" if expr else "filter: none")
                if not forward():
                    _err(f"no more matches ({scanner.rows_read:,} rows read)")
            elif cmd in ("?", "h", "help"):
                _err(HELP)
            else:
                _err(f"unknown command {cmd!r} ({HELP})")
        self.summary(scanner, not scanner.exhausted)
        return 0


def _broken_pipe():
    raise BrokenPipeError


def _is_ns(key: str) -> bool:
    from ..core import columns as C
    head = key.split(".")[0]
    return "." not in key and C.ALIASES.get(head, head) in (C.STATS, C.META, "stats", "meta")


def _clean(s: str) -> str:
    """Terminal control characters shown, not obeyed."""
    return s.replace("\x1b", "␛").replace("\r", "␍") if ("\x1b" in s or "\r" in s) else s
