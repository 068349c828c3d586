"""remove_header_mapper finds a heading whose braces span lines (docutils writes \\section{Title%\\n
\\label{...}%\\n}), as Data-Juicer's DOTALL regex does. Expected texts: Data-Juicer 1.6.1's
RemoveHeaderMapper().process_batched on the same documents."""
import pyarrow as pa

from gristmill.registry import create_op

DOCS = ["\\documentclass{article}\n\\begin{document}\n\\section{Configuration Variables%\n"
        "  \\label{configuration-variables}%\n}\n\nThe following variables.\n",
        "preamble\n\\subsection*{One line}\nbody\n", "no heading at all\n"]
DJ = ["\\section{Configuration Variables%\n  \\label{configuration-variables}%\n}\n\nThe following variables.\n",
      "\\subsection*{One line}\nbody\n", ""]


def test_heading_spanning_lines_is_found():
    out = create_op("remove_header_mapper", {}).process_batch(pa.RecordBatch.from_pylist([{"text": d} for d in DOCS]))
    assert out.column("text").to_pylist() == DJ
