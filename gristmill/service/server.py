"""`gristmill serve`: the REST API and web UI (work in progress)."""
from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--host", default="127.0.0.1")


def cmd_serve(args) -> int:
    raise NotImplementedError
