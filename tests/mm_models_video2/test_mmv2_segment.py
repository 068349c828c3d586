"""video_object_segmenting_mapper on a tiny random OWL-ViT (the open-vocabulary detector) and a tiny random SAM2 video
model saved to disk: detections on the first frame as the detector itself reports them, one mask per object per
frame at the frame's size, logits whose sign is the binarised mask, Data-Juicer's empty layouts."""
from pathlib import Path

import numpy as np
import pytest
import torch

from gristmill.registry import OpError, create_op
from mm_models_util import apply, clip_config, write_clip_tokenizer, write_video

cv2 = pytest.importorskip("cv2")
S = 64  # SAM2's input side


def build_owl(d: Path) -> Path:
    import transformers as t
    d.mkdir(parents=True, exist_ok=True)
    tok, vocab = write_clip_tokenizer(d)
    ip = t.OwlViTImageProcessor(size={"height": 32, "width": 32}, crop_size={"height": 32, "width": 32})
    t.OwlViTProcessor(image_processor=ip, tokenizer=tok).save_pretrained(d)
    cc = clip_config(vocab, projection_dim=32)
    torch.manual_seed(0)
    t.OwlViTForObjectDetection(t.OwlViTConfig(text_config=cc.text_config.to_dict(), projection_dim=32,
                                              vision_config=cc.vision_config.to_dict())).save_pretrained(d)
    return d


def build_sam2(d: Path) -> Path:
    """A SAM2 video model with a tiny Hiera backbone at a 64-pixel input (the heads keep SAM2's widths)."""
    import transformers as t
    hiera = dict(model_type="sam2_hiera_det_model", hidden_size=8, num_attention_heads=1, image_size=[S, S],
                 blocks_per_stage=[1, 1, 2, 1], embed_dim_per_stage=[8, 16, 32, 64],
                 num_attention_heads_per_stage=[1, 1, 1, 1], window_size_per_stage=[4, 4, 2, 2],
                 global_attention_blocks=[3], window_positional_embedding_background_size=[4, 4])
    vision = dict(model_type="sam2_vision_model", backbone_config=hiera, backbone_channel_list=[64, 32, 16, 8],
                  backbone_feature_sizes=[[S // 4, S // 4], [S // 8, S // 8], [S // 16, S // 16]])
    cfg = t.Sam2VideoConfig(vision_config=vision, prompt_encoder_config=dict(image_size=S, patch_size=16),
                            image_size=S, memory_attention_num_layers=1, num_maskmem=3,
                            memory_attention_rope_feat_sizes=[S // 16, S // 16])
    torch.manual_seed(0)
    t.Sam2VideoModel(cfg).save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("seg")
    rs = np.random.RandomState(0)
    frames = [np.clip(rs.randint(0, 256, (40, 48, 3)) * 0.4 + 30 * i, 0, 255).astype(np.uint8) for i in range(3)]
    return {"owl": build_owl(d / "owl"), "sam2": build_sam2(d / "sam2"), "video": write_video(d / "clip.mp4", frames)}


def detections(owl, video, names, conf):
    """The detector's own boxes on the first frame as OpenCV decodes it, JPEG round trip included."""
    from PIL import Image
    from transformers import OwlViTForObjectDetection, OwlViTProcessor
    ok, f = cv2.VideoCapture(video).read()
    f = cv2.imdecode(cv2.imencode(".jpg", f)[1], cv2.IMREAD_COLOR)
    img = Image.fromarray(f[:, :, ::-1].copy())
    proc, model = OwlViTProcessor.from_pretrained(owl), OwlViTForObjectDetection.from_pretrained(owl).eval()
    with torch.no_grad():
        out = model(**proc(text=[names], images=img, return_tensors="pt"))
    r = proc.post_process_grounded_object_detection(out, threshold=conf, target_sizes=[(img.height, img.width)],
                                                    text_labels=[names])[0]
    return [[int(v) for v in b] for b in r["boxes"].tolist()], [int(x) for x in r["labels"]], r["scores"].tolist()


def test_masks_per_frame_and_object(env, tmp_path):
    names = ["cat", "dog"]
    top = sorted(detections(env["owl"], env["video"], names, 0.0)[2])
    conf = (top[-2] + top[-3]) / 2  # two objects: the detector's two best boxes
    rows = [{"id": 1, "videos": [env["video"]], "main_character_list": names},
            {"id": 2, "videos": [env["video"]], "main_character_list": None},
            {"id": 3, "videos": [], "main_character_list": names}]
    kept, removed, rej = apply("video_object_segmenting_mapper", rows, sam2_hf_model=str(env["sam2"]),
                               yoloe_path=str(env["owl"]), yoloe_conf=conf, if_save_visualization=True,
                               save_visualization_dir=str(tmp_path / "vis"))
    assert not rej and not removed and len(kept) == 3
    tags = kept[0]["__meta__"]["video_object_segment_tags"]
    boxes, labels, scores = detections(env["owl"], env["video"], names, conf)
    assert len(boxes) == 2 and set(labels) <= {0, 1}
    assert tags["object_cls_list"] == labels and tags["cls_id_dict"] == names
    assert tags["yoloe_conf_list"] == pytest.approx(scores)
    seg = tags["segment_data"]
    assert len(seg) == 3 and all(len(f) == len(boxes) for f in seg)
    m = np.array(seg[2][0])
    assert m.shape == (1, 40, 48) and m.dtype == bool
    empty = {"segment_data": [], "cls_id_dict": [], "object_cls_list": [], "yoloe_conf_list": []}
    assert [r["__meta__"]["video_object_segment_tags"] for r in kept[1:]] == [empty, empty]
    assert len(list((tmp_path / "vis").glob("clip_mask_*_*.jpg"))) == 3 * len(boxes)

    kept2, _, rej = apply("video_object_segmenting_mapper", rows[:1], sam2_hf_model=str(env["sam2"]),
                          yoloe_path=str(env["owl"]), yoloe_conf=conf, if_binarize=False)
    logits = np.array(kept2[0]["__meta__"]["video_object_segment_tags"]["segment_data"], np.float32)
    assert not rej and logits.shape == (3, len(boxes), 1, 40, 48)
    assert ((logits > 0) == np.array(seg)).mean() > 0.999  # float32 round trip at the threshold aside


def test_models_declared_and_yoloe_checkpoint_refused(env, tmp_path):
    with pytest.raises(OpError, match="facebook/sam2.1-hiera-tiny"):
        create_op("video_object_segmenting_mapper", {"yoloe_path": str(env["owl"])})
    ck = tmp_path / "yoloe-11l-seg.pt"
    ck.write_bytes(b"x")
    try:
        import ultralytics  # noqa: F401
    except ImportError:  # DJ's YOLOE checkpoint runs through ultralytics only: refused before any work
        with pytest.raises(OpError, match="pip install ultralytics"):
            create_op("video_object_segmenting_mapper", {"sam2_hf_model": str(env["sam2"]), "yoloe_path": str(ck)})
    else:  # pragma: no cover - not in the test extra (it installs torchvision)
        assert create_op("video_object_segmenting_mapper", {"sam2_hf_model": str(env["sam2"]),
                                                            "yoloe_path": str(ck)}).models() == []
