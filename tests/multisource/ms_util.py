"""Helpers of the multi-source tests: small inputs of several shapes, recipes, the CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_jsonl(path, rows, extra_lines=()):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
        for line in extra_lines:
            f.write(line + "\n")
    return str(path)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


def write_recipe(path, recipe: dict):
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(recipe, f, allow_unicode=True, sort_keys=False)
    return str(path)


def cli(*args, cwd=None, timeout=300, own_process=False):
    """``gristmill ARGS`` as a finished process (returncode, stdout, stderr). In this process by default
    (``gristmill.cli.main``, with stdout/stderr captured and the working directory set): these tests check
    bytes and messages, not the process, and a new interpreter costs ~1 s a call. ``own_process`` for a run
    that must not leave its traces here (user modules it imports, ops it registers)."""
    args = [str(a) for a in args]
    if own_process:
        return subprocess.run([sys.executable, "-m", "gristmill.cli", *args], capture_output=True,
                              text=True, cwd=cwd or REPO, timeout=timeout)
    import contextlib
    import io
    import traceback

    from gristmill.cli import main
    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(cwd or REPO)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(args)
            except SystemExit as e:  # argparse's refusals
                rc = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            except Exception:  # noqa: BLE001 - as the interpreter would report it: a traceback, status 1
                traceback.print_exc()
                rc = 1
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["gristmill", *args], rc if isinstance(rc, int) else 0 if rc is None else 1,
                                       out.getvalue(), err.getvalue())


def check_source_funnel(src: dict):
    """Nothing lost within one source: through its own ops and through the shared ones."""
    rows = src["rows_in"]
    rep = json.load(open(src["report"]))
    for row in rep["ops"]:
        assert row["rows_in"] + row["added"] == row["rows_out"] + row["removed"] + row["rejected"], row
    own = [r for r in rep["ops"] if r["op"] != "read"]
    assert (own[-1]["rows_out"] if own else rep["rows_read"]) == src["rows_after_source_ops"]
    lost = sum(r["removed"] + r["rejected"] - r["added"] for r in rep["ops"])
    assert rows - lost == src["rows_after_source_ops"]
    n = src["rows_after_source_ops"]
    for row in src["shared_ops"]:
        assert row["rows_in"] == n, row
        assert row["rows_in"] + row["added"] == row["rows_out"] + row["removed"] + row["rejected"], row
        n = row["rows_out"]
    assert n == src["rows_out"]
