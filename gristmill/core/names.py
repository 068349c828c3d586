"""Suggestions for error messages."""
from __future__ import annotations

import difflib


def closest(name: str, candidates) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``candidates``, or ``""``."""
    m = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.5)
    return f"; did you mean {m[0]!r}?" if m else ""
