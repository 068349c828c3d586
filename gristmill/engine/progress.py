"""The live progress of a run (rows/s, MB/s per stage), fed by the workers' reports: a console bar, and,
when the environment names one (``GRISTMILL_PROGRESS_FILE``, set by the service's job manager), a small
JSON file rewritten atomically (temp + rename) at most twice a second as rows come in, and at each stage's
start and end and each finished shard, whether or not the bar is shown."""
from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone

PROGRESS_FILE_ENV = "GRISTMILL_PROGRESS_FILE"
FILE_INTERVAL = 0.5  # seconds between two writes of the progress file (stage start / end always write)


class Progress:
    """Live bar (rows/s, MB/s); a no-op when disabled (the progress file is still written when asked)."""

    def __init__(self, enabled: bool, op_names: dict[int, str] | None = None):
        self.enabled = enabled
        self.op_names = op_names or {}  # position -> name, for the per-op counts of finished shards
        self.ops: dict[int, dict] = {}
        self._p = None
        self._file = os.environ.get(PROGRESS_FILE_ENV) or None
        self._written = 0.0
        self.label = ""
        self.total = 0
        self.done = 0
        self.rows = 0
        self.bytes = 0
        self.t0 = time.perf_counter()

    def start(self, label: str, total_shards: int):
        self.label, self.total, self.done = label, total_shards, 0
        self.rows = 0
        self.bytes = 0
        self.t0 = time.perf_counter()
        self._write(force=True)
        if not self.enabled:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar
        self._p = Bar(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TextColumn("shards"), TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                           transient=False)
        self._task = self._p.add_task(label, total=total_shards, rate="")
        self._p.start()

    def add(self, rows: int, nbytes: int):
        if self._p is None:
            if self._file:
                self.rows += rows
                self.bytes += nbytes
                self._write()
            return
        self.rows += rows
        self.bytes += nbytes
        dt = max(time.perf_counter() - self.t0, 1e-6)
        self._p.update(self._task, rate=f"{self.rows:,} rows  {self.rows / dt:,.0f} rows/s  "
                                        f"{self.bytes / dt / 1e6:,.1f} MB/s")
        self._write()

    def shard_done(self, counts: dict | None = None):
        """A shard finished; ``counts`` (its marker's per-op counts, keyed by position) add to the live
        per-op totals of the stage."""
        self.done += 1
        for pos, c in (counts or {}).items():
            t = self.ops.setdefault(int(pos), {"rows_in": 0, "rows_out": 0, "removed": 0, "rejected": 0})
            for k in t:
                t[k] += c.get(k, 0)
        self._write(force=True)  # shards are big: a write per finished shard is cheap
        if self._p is not None:
            self._p.advance(self._task)

    def stop(self):
        self._write(force=True)
        if self._p is not None:
            self._p.stop()
            self._p = None

    def snapshot(self) -> dict:
        """What the progress file holds: the stage, shards done of total, rows and bytes read in this stage,
        their rates, and when (ISO-8601 UTC)."""
        dt = max(time.perf_counter() - self.t0, 1e-6)
        return {"stage": self.label, "shards_done": self.done, "shards_total": self.total, "rows": self.rows,
                "bytes": self.bytes, "rows_per_s": round(self.rows / dt, 1),
                "mb_per_s": round(self.bytes / dt / 1e6, 3),
                "ops": [{"op": self.op_names.get(p, "read" if p == -1 else "mixture" if p == -2 else str(p)),
                         "position": p if p >= 0 else None, **c} for p, c in sorted(self.ops.items())],
                "updated": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")}

    def _write(self, force: bool = False) -> None:
        if not self._file:
            return
        now = time.monotonic()
        if not force and now - self._written < FILE_INTERVAL:
            return
        self._written = now
        tmp = f"{self._file}.tmp-{os.getpid()}"
        try:
            with open(tmp, "w") as f:
                json.dump(self.snapshot(), f)
            os.replace(tmp, self._file)
        except OSError:  # the file is a courtesy to a watcher: never fail a run over it
            try:
                os.unlink(tmp)
            except OSError:
                pass
