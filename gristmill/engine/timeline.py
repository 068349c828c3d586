"""An opt-in timeline of a run, for finding where its wall time goes (issue 25): with ``GRISTMILL_TIMELINE=FILE``
set, the main process and every worker append one JSON line per event (wall-clock time, the process's CPU
seconds so far, pid, event, details) to FILE; ``bench/timeline.py`` runs a recipe with it and prints the critical
path. Unset (the default), :func:`mark` returns at once."""
from __future__ import annotations

import json
import os
import time

VAR = "GRISTMILL_TIMELINE"


def mark(event: str, **details) -> None:
    """Append ``event`` to the timeline file, if one is set (one small O_APPEND write: lines from several
    processes do not interleave)."""
    path = os.environ.get(VAR)
    if not path:
        return
    line = json.dumps({"t": time.time(), "cpu": round(time.process_time(), 4), "pid": os.getpid(), "event": event,
                       **details}) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError:
        pass
