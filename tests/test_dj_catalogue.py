"""Data-Juicer 1.6.1's op catalogue against ``gristmill ops``.

``tests/data/dj_1_6_1_ops.txt`` holds every name Data-Juicer 1.6.1 registers (``sorted(OPERATORS.modules)``
from the installed package); ``tests/data/dj_1_6_1_missing.txt`` the ones gristmill does not register yet,
each with the reason. The missing set must equal the expected list exactly, so the count can only go down:
an op that lands must leave the list in the same commit, and a name that disappears from gristmill fails.
The coverage table in docs/dj-compat.md is generated from the two files:
``python tests/test_dj_catalogue.py --write`` rewrites it."""
from __future__ import annotations

import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
DOC = ROOT / "docs" / "dj-compat.md"
BEGIN, END = "<!-- dj-catalogue:begin -->", "<!-- dj-catalogue:end -->"


def dj_names() -> list[str]:
    return [line.strip() for line in (DATA / "dj_1_6_1_ops.txt").read_text().splitlines() if line.strip()]


def expected_missing() -> dict[str, str]:
    out = {}
    for line in (DATA / "dj_1_6_1_missing.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, reason = line.split("\t")
            out[name] = reason
    return out


def render() -> str:
    names, missing = dj_names(), expected_missing()
    by_reason = collections.defaultdict(list)
    for name, reason in missing.items():
        by_reason[reason].append(name)
    lines = [BEGIN, "",
             f"**{len(names) - len(missing)} of the {len(names)} op names Data-Juicer 1.6.1 registers run in "
             f"gristmill** (`tests/data/dj_1_6_1_ops.txt`, checked by `tests/test_dj_catalogue.py`). "
             f"The {len(missing)} still missing, by reason:", "",
             "| reason | count | names |", "|---|---|---|"]
    for reason in sorted(by_reason, key=lambda r: (-len(by_reason[r]), r)):
        lines.append(f"| {reason} | {len(by_reason[reason])} | "
                     + ", ".join(f"`{n}`" for n in sorted(by_reason[reason])) + " |")
    lines += ["", END]
    return "\n".join(lines)


def test_dj_names_file_is_sorted_and_unique():
    names = dj_names()
    assert names == sorted(set(names)) and len(names) == 228


def test_missing_names_equal_expected_list():
    from gristmill.registry import all_ops

    ours = set(all_ops())
    missing = {n for n in dj_names() if n not in ours}
    expected = set(expected_missing())
    assert not expected - set(dj_names()), f"not Data-Juicer names: {sorted(expected - set(dj_names()))}"
    landed = sorted(expected - missing)
    assert not landed, f"now registered, remove from tests/data/dj_1_6_1_missing.txt: {landed}"
    lost = sorted(missing - expected)
    assert not lost, f"Data-Juicer names no longer registered by gristmill: {lost}"


def test_doc_table_is_current():
    text = DOC.read_text()
    assert BEGIN in text and END in text, "docs/dj-compat.md lacks the catalogue table"
    current = text[text.index(BEGIN):text.index(END) + len(END)]
    assert current == render(), "stale: run python tests/test_dj_catalogue.py --write"


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    text = DOC.read_text()
    if BEGIN in text:
        text = text[:text.index(BEGIN)] + render() + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n## Data-Juicer 1.6.1's op catalogue\n\n" + render() + "\n"
    DOC.write_text(text)
