"""latex_figure_context_extractor_mapper against Data-Juicer 1.6.1. ``data/latex_figures_dj161.json`` holds a
paper (figure, figure* with subfigure environments, \\subfloat with and without captions, wrapfigure,
minipages incl. a table one, a figure without graphics, nested braces in a caption, a \\ref inside an
equation, \\cref lists, unicode), a paper without figures and an empty text, and the rows DJ's op produced
for each param set."""
import json
from pathlib import Path

import pytest

from djops_util import run

CASES = json.loads((Path(__file__).parent / "data" / "latex_figures_dj161.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("params", list(CASES["dj"]))
def test_same_rows_as_data_juicer(params):
    kept, removed = run("latex_figure_context_extractor_mapper", CASES["rows"], **json.loads(params))
    assert kept == CASES["dj"][params]
    # the papers without a figure are not lost: removed with a reason
    assert [(r["paper_id"], r["__reason__"]) for r in removed] == [("2401.00002", "no figure with an image"),
                                                                    ("e", "no figure with an image")]


def test_fan_out_counts_balance(tmp_path):
    from djops_util import through_engine
    from gristmill.registry import create_op
    out, rep = through_engine(tmp_path, CASES["rows"], create_op("latex_figure_context_extractor_mapper", {}))
    row = rep["ops"][-1]
    assert len(out) == 8 == row["rows_out"] and row["removed"] == 2 and row["reasons"] == {"no figure with an image": 2}
    assert row["rows_in"] + row["added"] == row["rows_out"] + row["removed"]
