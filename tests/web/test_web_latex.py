"""arXiv LaTeX cleaning mappers (Data-Juicer names and params)."""
from pathlib import Path

import pytest

from gristmill.registry import create_op
from webutil import run_op

PAPER = (Path(__file__).parents[1] / "data" / "latex" / "paper.tex").read_text(encoding="utf-8")  # also tests/djcompat's


def _one(name, text, **params):
    res = run_op(create_op(name, params), [{"text": text}, {"text": None}])
    assert res.rejects == []
    out = res.batch.to_pylist()
    assert out[1]["text"] is None
    return out[0]["text"]


def test_remove_comments():
    out = _one("remove_comments_mapper", PAPER)
    assert "Preamble comment" not in out and "the title" not in out and "a remark" not in out
    assert "Commented out" not in out
    assert r"\title{On Mills}" + "\n" in out  # Data-Juicer's inline rule takes the space before the %
    assert r"50\% of $\norm$." in out  # an escaped percent is not a comment
    assert "\n\n" not in out  # comment lines go with their newline
    only_inline = _one("remove_comments_mapper", PAPER, multiline=False)
    # inline alone takes a comment line with the newline before it (Data-Juicer's [^\\]%.+$)
    assert "% Preamble" not in only_inline and "{article}\n\\usepackage" in only_inline
    only_lines = _one("remove_comments_mapper", PAPER, inline=False)
    assert "% the title" in only_lines and "Preamble comment" not in only_lines
    with pytest.raises(Exception, match="only 'tex' and 'md'"):
        create_op("remove_comments_mapper", {"doc_type": "html"})


def test_remove_header():
    out = _one("remove_header_mapper", PAPER)
    assert out.startswith(r"\section{Introduction}\label{sec:intro}")
    assert "documentclass" not in out and "abstract" not in out
    # a lone \paragraph heading counts (Data-Juicer's regex misses it)
    assert _one("remove_header_mapper", "junk\n\\paragraph{P} text") == "\\paragraph{P} text"
    assert _one("remove_header_mapper", "no heading at all") == ""
    assert _one("remove_header_mapper", "no heading at all", drop_no_head=False) == "no heading at all"
    assert _one("remove_header_mapper", r"x \sectionmark{y} z") == ""  # not a heading command


def test_remove_bibliography():
    out = _one("remove_bibliography_mapper", PAPER)
    assert out.endswith("%\\section{Commented out}\n")
    assert "Proofs" not in out and "bibliography" not in out
    assert _one("remove_bibliography_mapper", "a\n\\begin{thebibliography}{9}\\bibitem x") == "a\n"
    assert _one("remove_bibliography_mapper", "nothing to cut") == "nothing to cut"


def test_expand_macros():
    out = _one("expand_macro_mapper", PAPER)
    assert r"Let $x \in \mathbb{R}$ and $\varepsilon > 0$; we use 50\% of $\|\cdot\|$." in out
    assert r"\Rx is not a macro here, \mathbb{R}. ends a sentence and \mathbb{R}" + "\n" in out
    assert _one("expand_macro_mapper", "no macros \\R") == "no macros \\R"
    # later definitions win; a macro at the very end of the text expands
    assert _one("expand_macro_mapper", "\\def\\a{1}\n\\def\\a{2}\nx \\a").endswith("x 2")


def test_redpajama_chain():
    ops = [create_op(n, {}) for n in ("remove_comments_mapper", "expand_macro_mapper", "remove_header_mapper",
                                       "remove_bibliography_mapper")]
    from gristmill.core.fused import FusedOp
    import pyarrow as pa
    res = FusedOp(ops).run_batch(pa.RecordBatch.from_pylist([{"text": PAPER}]))
    text = res.batch.to_pylist()[0]["text"]
    assert text.startswith(r"\section{Introduction}")
    assert "Proofs" not in text and "%" not in text.replace(r"\%", "")
    assert r"Let $x \in \mathbb{R}$" in text  # macros expanded before the preamble that defines them goes
