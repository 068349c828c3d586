"""image_remove_background_mapper: rembg's u2net_custom session on a U2Net-interface ONNX file whose saliency is
the left half of the image, so the cut-out is known: opaque original pixels on the left, transparent (or
``bgcolor``) on the right; new PNG files, source files kept, bytes in → PNG bytes out, the model store."""
import io

import numpy as np
import pytest
from PIL import Image

from gristmill import models as store
from gristmill.registry import OpError, create_op
from img2_util import u2net_left_half

pytest.importorskip("rembg")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("bg")
    rs = np.random.RandomState(1)
    arr = rs.randint(0, 255, (40, 64, 3), dtype=np.uint8)
    Image.fromarray(arr).save(d / "a.jpg", quality=95)
    return u2net_left_half(d / "u2net.onnx"), str(d / "a.jpg"), np.asarray(Image.open(d / "a.jpg").convert("RGB"))


def test_cut_out_written_as_png(setup, tmp_path):
    model, src, arr = setup
    op = create_op("image_remove_background_mapper", {"model_path": model, "save_dir": str(tmp_path / "out"),
                                                      "device": "cpu"})
    out = op.apply([{"images": [src, src]}, {"images": []}])
    new = out[0]["images"]
    assert new[0] == new[1] and new[0].startswith(str(tmp_path / "out")) and new[0].endswith(".png")
    assert out[0]["__dj__source_file__"] == [src, src]
    assert out[1]["images"] == []
    img = np.asarray(Image.open(new[0]))
    assert img.shape == (40, 64, 4)
    assert (img[:, :28, 3] == 255).all() and (img[:, 36:, 3] == 0).all()  # Lanczos blurs the middle columns only
    assert (img[:, :28, :3] == arr[:, :28]).all()


def test_bgcolor_and_bytes(setup):
    model, src, arr = setup
    op = create_op("image_remove_background_mapper", {"model_path": model, "bgcolor": [255, 0, 0, 255],
                                                      "device": "cpu"})
    raw = open(src, "rb").read()
    got = op.apply([{"images": [raw]}])[0]["images"][0]
    img = Image.open(io.BytesIO(got))
    assert img.format == "PNG" and img.mode == "RGBA"
    px = np.asarray(img)
    assert (px[:, 36:] == [255, 0, 0, 255]).all() and (px[:, :28, :3] == arr[:, :28]).all()
    with pytest.raises(OpError, match="bgcolor"):
        create_op("image_remove_background_mapper", {"model_path": model, "bgcolor": [255, 0, 0]})


def test_model_from_the_store(setup, tmp_path):
    model, src, _ = setup
    with pytest.raises(OpError, match="gristmill models add u2net.onnx FILE"):
        create_op("image_remove_background_mapper", {})
    store.add("u2net.onnx", model)
    op = create_op("image_remove_background_mapper", {"save_dir": str(tmp_path), "device": "cpu"})
    assert op.models() == ["u2net.onnx"]
    assert np.asarray(Image.open(op.apply([{"images": [src]}])[0]["images"][0]))[:, 40:, 3].max() == 0
