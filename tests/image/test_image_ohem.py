"""image_ohem_selector: a user loss file scores each sample from its decoded images (bytes where given), the
loss lands in stats, the top_ratio / topk highest losses are kept (ties in dataset order) whatever the number
of workers; bad losses and bad params are refused. Expected losses are computed here from the pixels."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).parents[1] / "djops"))
from djops_util import through_engine  # noqa: E402

from gristmill.registry import create_op  # noqa: E402

SCORE = '''
import numpy as np

class Model:
    def __init__(self, weight):
        self.weight, self.moved = weight, None

    def to(self, device):
        self.moved = device

def model_factory(weight=1.0):
    return Model(weight)

def score_fn(model, samples, images, device, bias=0.0):
    assert device == "cpu" and model.moved == "cpu"
    return np.array([model.weight * sum(float(np.asarray(im).mean()) for im in ims) + bias for ims in images])
'''


@pytest.fixture
def data(tmp_path):
    paths = []
    for i, (w, h, v) in enumerate([(8, 6, 10), (5, 5, 200), (7, 3, 90), (4, 9, 200), (6, 6, 50)]):
        p = tmp_path / f"im{i}.png"
        Image.new("L", (w, h), v).save(p)  # grey: RGB mean == v
        paths.append(str(p))
    (tmp_path / "score.py").write_text(SCORE)
    rows = [{"text": str(i), "images": [p]} for i, p in enumerate(paths)]
    rows[2]["images"].append(paths[1])  # two images: 90 + 200
    return tmp_path, rows


def _op(tmp, **kw):
    return create_op("image_ohem_selector", dict({"score_file": str(tmp / "score.py"), "device": "cpu"}, **kw),
                     allow_scripts=True)


@pytest.mark.parametrize("np_", [1, 2])
def test_keeps_the_highest_losses(data, np_):
    tmp, rows = data
    out, report = through_engine(tmp / f"a{np_}", rows, _op(tmp, topk=3, batch_size=2, model_kwargs={"weight": 2.0},
                                                            score_kwargs={"bias": 1.0}),
                                 np=np_, keep_stats_in_res_ds=True)
    # losses 2*v + 1: 21, 401, 581, 401, 101 → the 3 highest: rows 1, 2, 3 (401 twice: both kept)
    assert [(r["text"], r["__stats__"]["image_ohem_loss"]) for r in out] == [("1", 401.0), ("2", 581.0), ("3", 401.0)]


def test_ratio_ties_in_dataset_order_and_removed_reason(data):
    tmp, rows = data
    out, _ = through_engine(tmp / "b", rows, _op(tmp, top_ratio=0.3, loss_field="hard"), keep_stats_in_res_ds=True)
    assert [r["text"] for r in out] == ["2"]  # int(0.3 * 5) = 1
    out, _ = through_engine(tmp / "c", rows, _op(tmp, topk=2, top_ratio=1.0))
    assert [r["text"] for r in out] == ["1", "2"]  # 200 ties with row 3's 200: the first in dataset order
    removed = [json.loads(x) for f in sorted((tmp / "c" / "work-np1" / "removed").glob("*.jsonl"))
               for x in f.read_text().splitlines()]
    assert sorted((r["row"]["text"], r["reason"], r["row"]["__stats__"]["image_ohem_loss"]) for r in removed) == [
        ("0", "not in the 2 highest image_ohem_loss", 10.0), ("3", "not in the 2 highest image_ohem_loss", 200.0),
        ("4", "not in the 2 highest image_ohem_loss", 50.0)]


def test_bytes_are_decoded_instead_of_paths(data):
    tmp, rows = data
    blob = (tmp / "im0.png").read_bytes()  # value 10
    rows = [dict(r, image_bytes=[blob] * len(r["images"])) for r in rows]
    out, _ = through_engine(tmp / "d", rows, _op(tmp, topk=5), keep_stats_in_res_ds=True)
    assert [r["__stats__"]["image_ohem_loss"] for r in out] == [10.0, 10.0, 20.0, 10.0, 10.0]


def test_refusals(data, tmp_path):
    tmp, _ = data
    with pytest.raises(Exception, match="top_ratio or topk"):
        _op(tmp)
    with pytest.raises(Exception, match="allow_scripts"):
        create_op("image_ohem_selector", {"score_file": str(tmp / "score.py"), "topk": 1})
    with pytest.raises(Exception, match=r"a Python file \(.py\)"):
        _op(tmp, topk=1, score_file=str(tmp / "score.txt"))
    empty = __import__("gristmill.core.columns", fromlist=["x"]).from_records([{"images": []}])
    with pytest.raises(Exception, match="existing Python file"):  # on first use (the workers)
        _op(tmp, topk=1, score_file=str(tmp / "none.py")).losses(empty)
    with pytest.raises(Exception, match="'nope' not found"):
        _op(tmp, topk=1, score_function="nope").losses(empty)
    with pytest.raises(Exception, match="score_fn or a score_file"):
        create_op("image_ohem_selector", {"topk": 1}, allow_scripts=True)
    op = create_op("image_ohem_selector", {"topk": 1, "score_fn": lambda m, s, ims, d: [1.0, float("nan")][:len(s)],
                                           "batch_size": 2}, allow_scripts=True)
    with pytest.raises(ValueError, match="NaN or infinite"):
        op.losses(__import__("gristmill.core.columns", fromlist=["x"]).from_records(
            [{"images": []}, {"images": []}]))
