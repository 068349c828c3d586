"""detect_main_character_mapper, detect_character_locations_mapper and detect_character_attributes_mapper: a
tiny random LLaVA (the nested mllm_mapper) and BLIP saved to disk, a TorchScript open-vocabulary detector at the
documented interface; the flow checked with the VLM's answers scripted per prompt (parsing, IoU or BLIP
choice, class prompts, yes/no checks), and once end to end with the tiny LLaVA answering."""
import sys
from pathlib import Path

import pytest

from gristmill.ops.image.detect_character import iou_areas, parse_box, parse_main_characters
from gristmill.registry import create_op

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
sys.path[:0] = [str(Path(__file__).parent.parent / "mm_models"), str(Path(__file__).parent.parent / "text_models")]

from human_models_util import NamedColorBoxes, save_script, two_things  # noqa: E402
from test_mm_matching import build_blip_itm  # noqa: E402
from test_mm_mllm import build_llava  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("chars")
    return {"llava": str(build_llava(d / "llava")), "blip": str(build_blip_itm(d / "blip")),
            "det": save_script(NamedColorBoxes(), d / "det.ts"), "image": two_things(d / "two.png")}


def locations_op(models, **kw):
    return create_op("detect_character_locations_mapper", {
        "mllm_mapper_args": {"hf_model": models["llava"], "max_new_tokens": 4, "device": "cpu"},
        "image_text_matching_filter_args": {"hf_blip": models["blip"]}, "yoloe_path": models["det"],
        "device": "cpu", **kw})


def scripted(answers):
    def ask(prompt, images):
        for key, answer in answers.items():
            if key in prompt:
                return answer(prompt) if callable(answer) else answer
        return "no idea"
    return ask


def test_parsers():
    assert parse_main_characters('x {"count": 2, "main_character": ["a", "b"]} y', 0) == ["a", "b"]
    assert parse_main_characters('{"count": 2, "main_character": ["a", "b"]}', 3) == []
    assert parse_main_characters("none", 0) == [] and parse_main_characters("{bad json}", 0) == []
    assert parse_box("```json[0.5, 0.25, 1, 1]```", 64, 48) == [32, 12, 64, 48]
    assert parse_box("[0.5, 2, 1, 1]", 64, 48) is None and parse_box("[1, 2]", 64, 48) is None
    assert iou_areas([0, 0, 10, 10], [5, 0, 15, 10]) == (50 / 150, 100, 100)
    assert iou_areas([0, 0, 10, 10], [20, 20, 30, 30]) == (0, 0, 0)


def test_locations(models):
    from gristmill.ops.image.model_matching import ITMModel
    op = locations_op(models)
    op.ask = scripted({'region "red square"': "[0.125, 0.1667, 0.375, 0.5]",  # = the detector's box (IoU 1)
                       'region "blue bar"': "[0, 0, 0.25, 0.25]",  # no overlap: BLIP picks
                       'region "red dot"': "I cannot tell"})
    names = ["red square", "blue bar", "green hat", "red dot"]
    got = op.apply([{"images": [models["image"]], "main_character_list": names}])[0]["__meta__"]
    locs = got["main_character_locations_list"]
    assert locs[0] == {"main_character": "red square", "bbox": [8, 8, 24, 24]}  # equal areas: the VLM's box
    from PIL import Image
    img = Image.open(models["image"]).convert("RGB")
    s_y, s_l = ITMModel(models["blip"], "cpu", False, 2).match(
        [("blue bar", img.crop([36, 20, 60, 44])), ("blue bar", img.crop([0, 0, 16, 12]))], lambda im: im).tolist()
    want = [] if max(s_y, s_l) < 0.4 else [{"main_character": "blue bar",
                                             "bbox": [36, 20, 60, 44] if s_y > s_l else [0, 0, 16, 12]}]
    assert locs[1:] == want  # green hat: not detected; red dot: no box in the answer
    strict = locations_op(models, matching_score_threshold=1.01)
    strict.ask = op.ask
    out = strict.apply([{"images": [models["image"]], "__meta__": {"main_character_list": names}}])
    assert out[0]["__meta__"]["main_character_locations_list"] == locs[:1]  # meta fallback; BLIP below 1.01


def test_attributes(models):
    op = create_op("detect_character_attributes_mapper", {"detect_character_locations_mapper_args": {
        "mllm_mapper_args": {"hf_model": models["llava"], "max_new_tokens": 4, "device": "cpu"},
        "image_text_matching_filter_args": {"hf_blip": models["blip"]}, "yoloe_path": models["det"],
        "device": "cpu"}})
    seen = []

    def check(prompt):
        seen.append(prompt)
        return "yes" if '"bright"' in prompt or '"tiny"' in prompt else "no"
    op.locations.ask = scripted({
        'region "red square"': "[0.125, 0.1667, 0.375, 0.5]",
        'Please classify the character "red square"': "ASSISTANT: object",
        'Please classify the character "green hat"': "person",
        "extract all descriptions": lambda p: '["from the caption"]' if "'red square' from" in p else "plain words",
        "main object in this image, specifically the 'red square'": '["bright, tiny, square"]',
        "Only respond with 'yes'": check})
    row = {"text": "a red square", "images": [models["image"]], "main_character_list": ["red square", "green hat"]}
    got = op.apply([row])[0]["__meta__"]["main_character_attributes_list"]
    assert got == [{"main_character": "red square", "bbox": [8, 8, 24, 24], "characteristic_list": ["bright", "tiny"]},
                   {"main_character": "green hat", "bbox": [], "characteristic_list": ["plain words"]}]
    assert len(seen) == 3  # bright, tiny, square each checked on the crop


def test_main_character_end_to_end(models):
    op = create_op("detect_main_character_mapper", {"mllm_mapper_args": {
        "hf_model": models["llava"], "max_new_tokens": 6, "device": "cpu"}})
    rows = [{"text": "a red square and a blue bar", "images": [models["image"]]}, {"text": "none", "images": []}]
    got = op.apply(rows)
    answer = op.mllm.apply([{"text": "probe", "images": [models["image"]]}])[0]["text"][0]
    assert isinstance(answer, str) and answer  # the tiny model answers words, no JSON
    assert [r["__meta__"]["main_character_list"] for r in got] == [[], []]
    assert op.models() == []  # local directories: nothing from the store
    with pytest.raises(Exception, match="yoloe"):  # a missing file, or a store name not in the store
        create_op("detect_character_locations_mapper", {"mllm_mapper_args": {"hf_model": models["llava"]},
                                                        "image_text_matching_filter_args": {"hf_blip": models["blip"]}})
