"""The model store's Hugging Face directories (owner/name): add copies a model directory, listing shows it
with its size, fetch refuses with the download command, a non-model directory is refused."""
import pytest

from gristmill import models
from gristmill.media import inference as inf


def test_add_list_find(clip_dir):
    assert models.find("acme/clip") is None and models.kind("acme/clip") == "Hugging Face model directory"
    dest = models.add("acme/clip", str(clip_dir))
    assert dest == models.store_dir() / "acme" / "clip" and (dest / "config.json").is_file()
    size = sum(f.stat().st_size for f in clip_dir.rglob("*") if f.is_file())
    assert dict(models.listing())["acme/clip"] == size
    assert models.find("acme/clip") == dest and inf.model_dir("acme/clip") == str(dest)
    models.add("acme/clip", str(clip_dir))  # replacing an entry leaves no temp directory behind
    assert sorted(p.name for p in (models.store_dir() / "acme").iterdir()) == ["clip"]


def test_refusals(tmp_path):
    with pytest.raises(ValueError, match="not a Hugging Face model directory"):
        models.add("acme/empty", str(tmp_path))
    with pytest.raises(ValueError, match="huggingface-cli download acme/clip --local-dir DIR"):
        models.fetch("acme/clip")
    assert not models.is_hf_dir_name("../x") and not models.is_hf_dir_name("a/../b")
    assert inf.store_names("/abs/clip") == [] and inf.store_names("openai/clip-vit-base-patch32") == [
        "openai/clip-vit-base-patch32"]
    with pytest.raises(ValueError, match="neither a local model directory nor a Hugging Face repo id"):
        inf.check_ref("clip", "hf_clip")


def test_unchecked_lists_without_failing():
    from gristmill.registry import create_op
    with models.unchecked():
        op = create_op("image_nsfw_filter", {})
    assert models.required_models([op]) == ["Falconsai/nsfw_image_detection"]


def test_device_auto():
    import torch
    assert inf.pick_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert inf.pick_device("cpu") == "cpu"
