"""`gristmill inspect PATH`: a terminal sample browser (work in progress)."""
from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("path")


def cmd_inspect(args) -> int:
    raise NotImplementedError
