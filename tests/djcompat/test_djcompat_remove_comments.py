"""remove_comments_mapper is Data-Juicer's, rule for rule: inline (an unescaped ``%``, the character
before it and a non-empty rest of line) then multiline (lines still starting with ``%``). A bare ``%``
ending a line stays: docutils writes ``\\section{Title%`` and Data-Juicer keeps it (the arXiv reproduction
recipe's one difference before). Expected texts: Data-Juicer 1.6.1's RemoveCommentsMapper.process_batched on
the same inputs, for each inline/multiline setting."""
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from gristmill.registry import create_op

PAPER = (Path(__file__).parents[1] / "data" / "latex" / "paper.tex").read_text(encoding="utf-8")  # also tests/web's

TEXTS = [
    "\\section{Configuration Variables%\n  \\label{configuration-variables}%\n}\n\nThe following variables.\n",
    PAPER,
    "a % one\n% two\n% three\nb\n",
    "% first line\n%\nkept 50\\% here % gone\n%%\n",
    "x%y%z\n\\%\\% stays\n",
    "",
    "Résumé 中文% 注释\r\nnext\n",
]

# Data-Juicer 1.6.1's outputs, by params
DJ = {
    "{}": [
        "\\section{Configuration Variables%\n  \\label{configuration-variables}%\n}\n\nThe following variables.\n",
        "\\documentclass{article}\n\\usepackage{amsmath}\n\\newcommand{\\R}{\\mathbb{R}}\n\\newcommand*{\\eps}{\\varepsilon}\n\\def\\norm {\\|\\cdot\\|}\n\\title{On Mills}\n\\begin{document}\n\\maketitle\n\\begin{abstract}We study mills.\\end{abstract}\n\\section{Introduction}\\label{sec:intro}\nLet $x \\in \\R$ and $\\eps > 0$; we use 50\\% of $\\norm$.\n\\Rx is not a macro here, \\R. ends a sentence and \\R\n\\subsection*{Related work}\nMills are old~\\cite{a}.\n\\appendix\n\\section{Proofs}\nTrivial.\n\\bibliographystyle{plain}\n\\bibliography{refs}\n\\end{document}\n",
        "a\nb\n",
        "kept 50\\% here\n",
        "\n\\%\\% stays\n",
        "",
        "Résumé 中\nnext\n",
    ],
    "{\"inline\": false}": [
        "\\section{Configuration Variables%\n  \\label{configuration-variables}%\n}\n\nThe following variables.\n",
        "\\documentclass{article}\n\\usepackage{amsmath}\n\\newcommand{\\R}{\\mathbb{R}}\n\\newcommand*{\\eps}{\\varepsilon}\n\\def\\norm {\\|\\cdot\\|}\n\\title{On Mills} % the title\n\\begin{document}\n\\maketitle\n\\begin{abstract}We study mills.\\end{abstract}\n\\section{Introduction}\\label{sec:intro}\nLet $x \\in \\R$ and $\\eps > 0$; we use 50\\% of $\\norm$. % a remark\n\\Rx is not a macro here, \\R. ends a sentence and \\R\n\\subsection*{Related work}\nMills are old~\\cite{a}.\n\\appendix\n\\section{Proofs}\nTrivial.\n\\bibliographystyle{plain}\n\\bibliography{refs}\n\\end{document}\n",
        "a % one\nb\n",
        "kept 50\\% here % gone\n",
        "x%y%z\n\\%\\% stays\n",
        "",
        "Résumé 中文% 注释\r\nnext\n",
    ],
    "{\"multiline\": false}": [
        "\\section{Configuration Variables%\n  \\label{configuration-variables}%\n}\n\nThe following variables.\n",
        "\\documentclass{article}\n\\usepackage{amsmath}\n\\newcommand{\\R}{\\mathbb{R}}\n\\newcommand*{\\eps}{\\varepsilon}\n\\def\\norm {\\|\\cdot\\|}\n\\title{On Mills}\n\\begin{document}\n\\maketitle\n\\begin{abstract}We study mills.\\end{abstract}\n\\section{Introduction}\\label{sec:intro}\nLet $x \\in \\R$ and $\\eps > 0$; we use 50\\% of $\\norm$.\n\\Rx is not a macro here, \\R. ends a sentence and \\R\n\\subsection*{Related work}\nMills are old~\\cite{a}.\n\\appendix\n\\section{Proofs}\nTrivial.\n\\bibliographystyle{plain}\n\\bibliography{refs}\n\\end{document}\n",
        "a\nb\n",
        "% first line\n%\nkept 50\\% here\n",
        "\n\\%\\% stays\n",
        "",
        "Résumé 中\nnext\n",
    ],
}


@pytest.mark.parametrize("params", list(DJ))
def test_same_text_as_data_juicer(params):
    op = create_op("remove_comments_mapper", json.loads(params))
    out = op.process_batch(pa.RecordBatch.from_pylist([{"text": t} for t in TEXTS])).column("text").to_pylist()
    assert out == DJ[params]


def test_bare_percent_ending_a_line_stays():
    op = create_op("remove_comments_mapper", {})
    out = op.apply([{"text": "\\section{Title%\nbody % note\n50\\% of it\n% gone\nend %\n"}])
    assert out[0]["text"] == DJ_BARE


# Data-Juicer 1.6.1 on that text (the space before "% note" and the newline before "% gone" go with them)
DJ_BARE = "\\section{Title%\nbody\n50\\% of it\nend %\n"


def test_arxiv_recipe_step_end_to_end(tmp_path):
    """gristmill run with the op as redpajama-arxiv.yaml writes it (doc_type tex, both rules)."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(TEXTS)),
                   encoding="utf-8")
    recipe = {"dataset_path": str(src), "export_path": str(tmp_path / "out.jsonl"), "work_dir": str(tmp_path / "w"),
              "process": [{"remove_comments_mapper": {"doc_type": "tex", "inline": True, "multiline": True}}]}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["text"] for r in out] == DJ["{}"]
