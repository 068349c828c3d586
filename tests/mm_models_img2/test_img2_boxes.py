"""image_detection_yolo_mapper and image_segment_mapper: Ultralytics-style exports (TorchScript, ONNX) with fixed
raw predictions, so letterboxing, the confidence cut, per-class NMS, scaling back and FastSAM's border rule give
exact boxes; a tiny random YOLOS directory against transformers' own post-processing; the model store."""
import numpy as np
import pytest
from PIL import Image

from gristmill import models as store
from gristmill.ops.image.model_detect import batched_nms, box_iou, letterbox, nms
from gristmill.registry import OpError, create_op
from img2_util import onnx_export, raw_head, torchscript_export

BBOX, LABEL = "__dj__bbox__", "__dj__class_label__"
# anchors in a 64x64 letterboxed input of a 64x48 image (8 px of padding above and below)
DET = [(20, 18, 10, 10, 0.9, 0.0),   # kept, class 0
       (21, 19, 10, 10, 0.8, 0.0),   # IoU 0.68 with the first, same class: suppressed
       (21, 19, 10, 10, 0.0, 0.7),   # class 1: kept
       (50, 40, 8, 8, 0.04, 0.03),   # at most conf: dropped
       (60, 50, 12, 12, 0.3, 0.1)]   # kept, clipped at the right and bottom edges
EXPECTED = [[20, 10, 10, 10], [21, 11, 10, 10], [59, 42, 10, 12]]


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    d = tmp_path_factory.mktemp("img")
    rs = np.random.RandomState(0)
    Image.fromarray(rs.randint(0, 255, (48, 64, 3), dtype=np.uint8)).save(d / "a.png")
    Image.fromarray(rs.randint(0, 255, (30, 40, 3), dtype=np.uint8)).save(d / "b.png")
    return str(d / "a.png"), str(d / "b.png")


def test_box_helpers():
    b = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]], np.float64)
    assert box_iou(b[:1], b)[0].tolist() == pytest.approx([1.0, 81 / 119, 0.0])
    assert nms(b, np.array([0.5, 0.9, 0.1]), 0.5).tolist() == [1, 2]
    assert batched_nms(b, np.array([0.5, 0.9, 0.1]), np.array([0, 1, 0]), 0.5).tolist() == [1, 0, 2]
    x, gain, pad = letterbox(Image.new("RGB", (64, 48), (255, 0, 0)), (64, 64))
    assert x.shape == (3, 64, 64) and gain == 1 and pad == (0, 8)
    assert x[:, 8, 0].tolist() == [1, 0, 0] and x[:, 0, 0].tolist() == pytest.approx([114 / 255] * 3)


def test_detection_torchscript_export(image, tmp_path):
    path = torchscript_export(tmp_path / "yolo.torchscript", raw_head(DET, 2))
    op = create_op("image_detection_yolo_mapper", {"model_path": path, "imgsz": 64, "device": "cpu"})
    out = op.apply([{"images": [image[0]]}, {"images": []},
                    {"images": [image[0]], "__meta__": {BBOX: [[[1.0, 2.0, 3.0, 4.0]]], LABEL: [[5.0]]}}])
    assert out[0]["__meta__"][BBOX] == [EXPECTED]
    assert out[0]["__meta__"][LABEL] == [[0.0, 1.0, 0.0]]
    assert out[1]["__meta__"] == {BBOX: [], LABEL: []}  # no image: no boxes
    assert out[2]["__meta__"] == {BBOX: [[[1.0, 2.0, 3.0, 4.0]]], LABEL: [[5.0]]}  # already tagged: kept
    strict = create_op("image_detection_yolo_mapper", {"model_path": path, "imgsz": 64, "conf": 0.5, "iou": 0.9,
                                                       "device": "cpu"})
    # iou 0.9: the overlapping class-0 box survives; conf 0.5 drops the 0.3 one
    assert strict.apply([{"images": [image[0]]}])[0]["__meta__"][BBOX] == [[[20, 10, 10, 10], [21, 11, 10, 10],
                                                                             [21, 11, 10, 10]]]


def test_detection_onnx_fixed_shape_and_store(image, tmp_path, monkeypatch):
    path = onnx_export(tmp_path / "yolo11n.onnx", raw_head(DET, 2))
    op = create_op("image_detection_yolo_mapper", {"model_path": path, "device": "cpu"})  # imgsz from the export
    out = op.apply([{"images": [image[0], image[1]]}])[0]["__meta__"]
    assert out[BBOX][0] == EXPECTED
    # the 40x30 image: scaled by 1.6 to 64x48, 8 px of padding above
    assert out[BBOX][1][0] == pytest.approx([20 / 1.6, 10 / 1.6, 10 / 1.6, 10 / 1.6], abs=1e-5)
    with pytest.raises(OpError, match="yolo export model=yolo11n.pt format=onnx"):
        create_op("image_detection_yolo_mapper", {})
    store.add("yolo11n.pt", path)  # Data-Juicer's name, the export's content
    assert create_op("image_detection_yolo_mapper", {"device": "cpu"}).apply(
        [{"images": [image[0]]}])[0]["__meta__"][BBOX] == [EXPECTED]


def test_pickled_checkpoint_is_refused_with_the_export_command(image, tmp_path):
    import torch
    torch.save({"model": 1}, tmp_path / "yolo11n.pt")
    op = create_op("image_detection_yolo_mapper", {"model_path": str(tmp_path / "yolo11n.pt"), "device": "cpu"})
    with pytest.raises(ValueError, match="format=onnx"):
        op.apply([{"images": [image[0]]}])


def test_segment_fastsam_export_border_rule(image, tmp_path):
    seg = [(32, 32, 62, 46, 0.9),   # (1, 1, 63, 47): sides snap to the border, then IoU > 0.9: the whole image
           (30, 30, 10, 10, 0.6),   # top side 17 px from the border: snapped to 0
           (30, 30, 10, 10, 0.5),   # same box: suppressed (one class)
           (10, 30, 4, 4, 0.05)]    # at most conf: dropped
    for path in (onnx_export(tmp_path / "fastsam.onnx", raw_head(seg, 1, extra=32)),
                 torchscript_export(tmp_path / "fastsam.torchscript", raw_head(seg, 1, extra=32))):
        op = create_op("image_segment_mapper", {"model_path": path, "imgsz": 64, "device": "cpu"})
        out = op.apply([{"images": [image[0]]}, {"images": []}])
        assert out[0]["__meta__"] == {BBOX: [[[32, 24, 64, 48], [30, 13.5, 10, 27]]]}
        assert out[1]["__meta__"] == {BBOX: []}


def test_detection_transformers_directory(image, tmp_path):
    import torch
    import transformers as T
    torch.manual_seed(0)
    cfg = T.YolosConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
                        image_size=[64, 64], patch_size=16, num_detection_tokens=5, num_labels=3)
    T.YolosForObjectDetection(cfg).save_pretrained(tmp_path / "yolos")
    T.YolosImageProcessor(size={"shortest_edge": 64, "longest_edge": 64}).save_pretrained(tmp_path / "yolos")
    op = create_op("image_detection_yolo_mapper", {"model_path": str(tmp_path / "yolos"), "conf": 0.0, "iou": 1.0,
                                                   "device": "cpu"})
    got = op.apply([{"images": [image[0]]}])[0]["__meta__"]
    model = T.YolosForObjectDetection.from_pretrained(tmp_path / "yolos").eval()
    proc = T.YolosImageProcessor.from_pretrained(tmp_path / "yolos")
    im = Image.open(image[0]).convert("RGB")
    with torch.no_grad():
        res = proc.post_process_object_detection(model(**proc(images=[im], return_tensors="pt")), threshold=0.0,
                                                 target_sizes=[(48, 64)])[0]
    order = np.argsort(-res["scores"].numpy(), kind="stable")
    b = res["boxes"].numpy()[order]
    want = np.stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], 1)
    assert len(want) == 5 and np.allclose(got[BBOX][0], want, atol=1e-4)
    assert got[LABEL][0] == res["labels"].numpy()[order].astype(float).tolist()


def test_segment_transformers_directory(image, tmp_path):
    import torch
    import transformers as T
    torch.manual_seed(0)
    swin = T.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1],
                        window_size=4, out_features=["stage1", "stage2", "stage3", "stage4"])
    cfg = T.Mask2FormerConfig(backbone_config=swin, use_pretrained_backbone=False, feature_size=32,
                              mask_feature_dim=32, hidden_dim=32, encoder_feedforward_dim=32, dim_feedforward=32,
                              num_queries=5, decoder_layers=2, encoder_layers=1, num_attention_heads=2, num_labels=2,
                              common_stride=4)
    T.Mask2FormerForUniversalSegmentation(cfg).save_pretrained(tmp_path / "m2f")
    T.Mask2FormerImageProcessor(size={"height": 64, "width": 64}).save_pretrained(tmp_path / "m2f")
    op = create_op("image_segment_mapper", {"model_path": str(tmp_path / "m2f"), "conf": 0.0, "iou": 1.0,
                                            "device": "cpu"})
    got = op.apply([{"images": [image[0]]}])[0]["__meta__"][BBOX][0]
    model = T.Mask2FormerForUniversalSegmentation.from_pretrained(tmp_path / "m2f").eval()
    proc = T.Mask2FormerImageProcessor.from_pretrained(tmp_path / "m2f")
    with torch.no_grad():
        res = proc.post_process_instance_segmentation(
            model(**proc(images=[Image.open(image[0]).convert("RGB")], return_tensors="pt")), threshold=0.0,
            target_sizes=[(48, 64)])[0]
    seg = res["segmentation"].numpy()
    want = []
    for info in sorted(res["segments_info"], key=lambda i: -i["score"]):
        ys, xs = np.nonzero(seg == info["id"])
        want.append([(xs.min() + xs.max() + 1) / 2, (ys.min() + ys.max() + 1) / 2, xs.max() + 1 - xs.min(),
                     ys.max() + 1 - ys.min()])
    assert want and got == want  # the boxes of the instance masks, by falling score
