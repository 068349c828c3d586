"""The live progress bar of a run (rows/s, MB/s per stage), fed by the workers' reports."""
from __future__ import annotations

import time


class Progress:
    """Live bar (rows/s, MB/s); a no-op when disabled."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._p = None

    def start(self, label: str, total_shards: int):
        if not self.enabled:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar
        self.rows = 0
        self.bytes = 0
        self.t0 = time.perf_counter()
        self._p = Bar(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TextColumn("shards"), TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                           transient=False)
        self._task = self._p.add_task(label, total=total_shards, rate="")
        self._p.start()

    def add(self, rows: int, nbytes: int):
        if self._p is None:
            return
        self.rows += rows
        self.bytes += nbytes
        dt = max(time.perf_counter() - self.t0, 1e-6)
        self._p.update(self._task, rate=f"{self.rows:,} rows  {self.rows / dt:,.0f} rows/s  "
                                        f"{self.bytes / dt / 1e6:,.1f} MB/s")

    def shard_done(self):
        if self._p is not None:
            self._p.advance(self._task)

    def stop(self):
        if self._p is not None:
            self._p.stop()
            self._p = None
