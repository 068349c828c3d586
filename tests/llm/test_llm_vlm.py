"""image_tagging_vlm_mapper and video_captioning_from_vlm_mapper against the local server: the OpenAI chat
messages with images (Data-Juicer's shape: a text part, then base64 data URLs in image_url parts), tag
parsing, caption samples, failures to rejects, nothing lost."""
from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
from llm_server import LLMServer

from gristmill.llm.client import RequestFailed
from gristmill.media import EOC_TOKEN, VIDEO_TOKEN
from gristmill.ops.llm.vlm import IMAGE_TAG_INPUT_TEMPLATE, IMAGE_TAG_SYSTEM_PROMPT, VIDEO_CAPTION_PROMPT
from gristmill.registry import create_op

PIL = pytest.importorskip("PIL")
pytestmark = pytest.mark.slow  # an HTTP server


def _op(name, srv, **params):
    return create_op(name, {"api_endpoint": srv.url + "/chat/completions", "retry_base_delay": 0.01, **params})


def _png(path, color) -> bytes:
    from PIL import Image
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(buf, format="png")
    path.write_bytes(buf.getvalue())
    return buf.getvalue()


def _image_of(body) -> bytes:
    url = body["messages"][-1]["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    return base64.b64decode(url.split(",", 1)[1])


def test_image_tagging_vlm_mapper(tmp_path):
    red, blue = _png(tmp_path / "red.png", "red"), _png(tmp_path / "blue.png", "blue")
    green = _png(tmp_path / "green.png", "green")

    def answer(body, n):
        img = _image_of(body)
        if img == red:
            return '```json\n{"tags": ["Red Square", "red square", "Plain Colour", 7]}\n```'
        if img == blue:
            return "{'tag': 'blue, small image'}"
        if img == green and n == 0:
            return "I see a green square."  # no tag: asked again
        return (500, "overloaded") if img == b"POISON" else '{"tags": []}'

    rows = [{"text": "a red and a blue square", "images": [str(tmp_path / "red.png"), str(tmp_path / "blue.png")]},
            {"text": "nothing", "images": []},
            {"text": "green", "images": [str(tmp_path / "green.png")]},
            {"text": "tagged", "images": [str(tmp_path / "red.png")], "__meta__": {"image_tags": [["old"]]}}]
    with LLMServer(answer) as srv:
        op = _op("image_tagging_vlm_mapper", srv, try_num=2)
        out = op.apply(rows)
        first = next(b for b in srv.bodies if _image_of(b) == red)  # concurrent: any order
        assert first["model"] == "Qwen/Qwen2.5-VL-7B-Instruct"
        assert first["messages"][0] == {"role": "system", "content": IMAGE_TAG_SYSTEM_PROMPT}
        assert first["messages"][1]["role"] == "user"
        assert first["messages"][1]["content"][0] == {"type": "text", "text": IMAGE_TAG_INPUT_TEMPLATE.format(
            text="a red and a blue square")}
        assert first["messages"][1]["content"][1]["type"] == "image_url" and _image_of(first) == red  # the file's bytes
        assert len(srv.bodies) == 2 + 2  # green asked twice; the tagged row and the row without images never
        with pytest.raises(RequestFailed, match="HTTP 500"):
            _op("image_tagging_vlm_mapper", srv, max_retries=0).apply([{"text": "t", "images": [b"POISON"]}])
    tags = [r["__meta__"]["image_tags"] for r in out]
    assert tags == [[["red-square", "plain-colour"], ["blue", "small-image"]], [[]], [[]], [["old"]]]
    assert [r["text"] for r in out] == [r["text"] for r in rows]


def _video(path, color, n=12):
    import av
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=10)
        s.width, s.height, s.pix_fmt = 32, 32, "yuv420p"
        for i in range(n):
            a = np.full((32, 32, 3), color, np.uint8)
            a[:, :, 2] = i * 20
            for p in s.encode(av.VideoFrame.from_ndarray(a, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return str(path)


def _first_frame(body) -> str:
    return body["messages"][-1]["content"][1]["image_url"]["url"]


def _first_frame_of(video) -> str:
    from gristmill.media.frames import uniform_frames
    buf = io.BytesIO()
    uniform_frames(video, 4)[0].convert("RGB").save(buf, format="jpeg", quality=95)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def _caption(body, n):
    parts = body["messages"][-1]["content"]
    kinds = {p["type"] for p in parts[1:]}
    return f"{parts[0]['text'].strip()} {len(parts) - 1} {'/'.join(sorted(kinds))} seed {body.get('seed', 0)}"


def test_video_captioning_from_vlm_mapper(tmp_path):
    pytest.importorskip("av")
    from gristmill.media.frames import uniform_frames
    v1, v2 = _video(tmp_path / "a.mp4", (200, 0, 0)), _video(tmp_path / "b.mp4", (0, 200, 0))
    rows = [{"id": "x", "text": f"{VIDEO_TOKEN} red {EOC_TOKEN} plain text {EOC_TOKEN}{VIDEO_TOKEN} green",
             "videos": [v1, v2], "p": "What happens?"},
            {"id": "y", "text": "no video", "videos": []}]
    with LLMServer(_caption) as srv:
        op = _op("video_captioning_from_vlm_mapper", srv, frame_num=4, prompt_key="p", system_prompt="be brief")
        out = op.apply(rows)
        b = next(b for b in srv.bodies if _first_frame(b) == _first_frame_of(v1))  # concurrent: any order
        assert b["model"] == "Qwen/Qwen3-VL-8B-Instruct" and b["temperature"] == 0 and b["max_tokens"] == 1024
        assert b["messages"][0] == {"role": "system", "content": "be brief"}
        parts = b["messages"][1]["content"]
        assert parts[0] == {"type": "text", "text": "What happens?"}
        want = []
        for img in uniform_frames(v1, 4):
            buf = io.BytesIO()
            img.convert("RGB").save(buf, format="jpeg", quality=95)
            want.append("data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode())
        assert [p["image_url"]["url"] for p in parts[1:]] == want and len(want) == 4
        assert len(srv.bodies) == 2
    assert [r["id"] for r in out] == ["x", "x#caption", "y"]  # nothing lost; a sample without videos: none new
    assert out[1]["text"] == (f"{VIDEO_TOKEN} What happens? 4 image_url seed 0 {EOC_TOKEN}"
                              f"{VIDEO_TOKEN} What happens? 4 image_url seed 0 {EOC_TOKEN}")
    assert out[0] == rows[0] and out[2] == rows[1]

    with LLMServer(_caption) as srv:
        op = _op("video_captioning_from_vlm_mapper", srv, caption_num=2, keep_candidate_mode="all",
                 keep_original_sample=False, video_input="video_url", sampling_params={"temperature": 0.8}, seed=5)
        out = op.apply(rows[:1])
        assert len(srv.bodies) == 4 and sorted(b.get("seed", -1) for b in srv.bodies) == [-1, -1, 6, 6]
        urls = sorted(b["messages"][0]["content"][1]["video_url"]["url"] for b in srv.bodies)
        assert {base64.b64decode(u.split(",", 1)[1]) for u in urls} == {open(v1, "rb").read(), open(v2, "rb").read()}
        assert all(u.startswith("data:video/mp4;") for u in urls)
        assert all(b["messages"][0]["content"][0]["text"] == VIDEO_CAPTION_PROMPT for b in srv.bodies)
        assert all(b["temperature"] == 0.8 and "max_tokens" not in b for b in srv.bodies)
    assert [r["id"] for r in out] == ["x#caption0", "x#caption1"]
    assert out[0]["text"].count("seed 0") == 2 and out[1]["text"].count("seed 6") == 2
    json.dumps(out)


def test_an_image_is_estimated_as_tokens_not_as_its_base64():
    from gristmill.llm.client import IMAGE_TOKENS, estimate_tokens
    big = "data:image/jpeg;base64," + "A" * 400_000
    body = {"messages": [{"role": "system", "content": "x" * 40}, {"role": "user", "content": [
        {"type": "text", "text": "y" * 80}, {"type": "image_url", "image_url": {"url": big}}]}], "max_tokens": 10}
    assert estimate_tokens(body) == (40 + 80) // 4 + IMAGE_TOKENS + 10


def test_a_dry_run_shows_images_shortened(tmp_path, capsys):
    from gristmill.core.fused import StopRun
    _png(tmp_path / "red.png", "red")
    op = create_op("image_tagging_vlm_mapper", {"api_endpoint": "http://127.0.0.1:9/v1/chat/completions",
                                                "dry_run": 1})
    with pytest.raises(StopRun):
        op.apply([{"text": "t", "images": [str(tmp_path / "red.png")]}])
    err = capsys.readouterr().err
    assert '"url": "data:image/jpeg;base64,' in err and "characters)" in err and "Text description: t" in err
