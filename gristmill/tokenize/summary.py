"""The short summary `gristmill tokenize` (and a recipe's tokenize step) prints instead of the full report:
per source docs, tokens, chars/token and share; totals; packing utilisation; the files of each format; and
where the full JSON report lies."""
from __future__ import annotations

import os

REPORT = "report.json"


def report_path(report: dict) -> str:
    """Where run_tokenize wrote the full report (JSON): ``report.json`` in the section's output directory."""
    return os.path.join(report["output"], REPORT)


def _share(p: dict) -> str:
    got = f"{100 * (p.get('achieved_share') or 0):.1f}%"
    if p.get("target_share") is not None:
        got += f" (target {100 * p['target_share']:.1f}%)"
    return got


def _cpt(v) -> str:
    return f"{v:.2f}" if v else "-"


def print_summary(report: dict, con) -> None:
    """Print the summary table of a tokenize ``report`` on the rich console ``con``."""
    from rich.table import Table
    st = report["stats"]
    t = Table(title=f"tokenized: {report['backend']}, eos {report['eos']}, seq_len {st['seq_len']}, pack {st['pack']}",
              title_justify="left")
    for col in ("source", "docs", "tokens", "chars/token", "tokens out", "share"):
        t.add_column(col, justify="left" if col == "source" else "right")
    for p in st["sources"]:
        t.add_row(str(p["name"]), f"{p['docs']:,}", f"{p['tokens']:,}", _cpt(p.get("chars_per_token")),
                  f"{p.get('tokens_used', 0):,}", _share(p))
    t.add_section()
    t.add_row("total", f"{st['docs']:,}", f"{st['tokens']:,}", _cpt(st.get("chars_per_token")),
              f"{st['tokens_out']:,}", "100.0%" if st["sources"] else "-")
    con.print(t)
    pk = st["packing"]
    con.print(f"packing: {pk['rows']:,} rows, utilisation {100 * pk['utilisation']:.1f}% "
              f"({pk['pad_tokens']:,} pad, {pk['truncated_tokens']:,} truncated, "
              f"{pk['docs_split_across_rows']:,} docs split across rows)", highlight=False)
    for o in report.get("outputs") or [{"format": st.get("format"), "output": report["output"],
                                        "files": report["files"]}]:
        data = [f for f in o["files"] if not f.endswith((".pieces.npy", ".rows.npy", ".docs.npy", ".json"))]
        shown = ", ".join(data[:3]) + (f", … ({len(data)} files)" if len(data) > 3 else "")
        con.print(f"{o['format']}: {o['output']}: {shown} (+ packing sidecars, manifest, stats.json)",
                  highlight=False)
    con.print(f"full report (JSON): {report_path(report)}", highlight=False)
