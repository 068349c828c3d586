"""Issue 23, finding 1: a request must not make the server run code shipped with a model, nor load a model (or
any file an op param names) from outside the data roots. A model directory inside the data root whose
config.json maps AutoConfig/AutoProcessor to its own module (which would write a marker file when imported):
``trust_remote_code: true`` is refused by REST (apply 403, validate not ok, job submission refused) and MCP
(apply_ops, validate_recipe, run_recipe) unless the server runs with --allow-scripts, and the marker never
appears. Variants: other ops and params (hf_tokenizer, stopwords_dir, save_dir), a model dir outside the root,
through a symlink, relative; a model-store name passes the path check (and fails on the empty store)."""
from __future__ import annotations

import json
import os
import sys

import pytest
from svcutil import LiveServer

from gristmill.service.jobs import JobManager

EVIL = '''import pathlib
pathlib.Path({marker!r}).write_text("model code ran in the server")
from transformers import PretrainedConfig


class EvilConfig(PretrainedConfig):
    model_type = "evil"
'''


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """The data root: an evil model dir, an image, a dataset naming it; outside it, a copy of the model dir, a
    stopwords list, and a link from the root to it."""
    from PIL import Image
    r = tmp_path_factory.mktemp("trust-root")
    out = tmp_path_factory.mktemp("trust-outside")
    for d in (r / "models" / "evil", out / "evil"):
        d.mkdir(parents=True)
        (d / "evil.py").write_text(EVIL.format(marker=str(r / "MARKER")))
        (d / "config.json").write_text(json.dumps({
            "model_type": "evil", "architectures": ["CLIPModel"],
            "auto_map": {"AutoConfig": "evil.EvilConfig", "AutoProcessor": "evil.EvilConfig",
                         "AutoModel": "evil.EvilConfig"}}))
    (out / "stopwords.json").write_text(json.dumps({"en": ["the"]}))
    os.symlink(out, r / "link-out")
    (r / "img").mkdir()
    Image.new("RGB", (16, 16), (200, 30, 30)).save(r / "img" / "a.png")
    (r / "data").mkdir()
    (r / "data" / "rows.jsonl").write_text(json.dumps({"text": TEXT, "images": [str(r / "img" / "a.png")]})
                                           + "\n")
    return r


def _marker(root):
    return root / "MARKER"


def _outside(root):
    return (root / "link-out").resolve()


TEXT = "<__dj__image> a red square <|__dj__eoc|>"  # the image token pairs the image with the text: the model loads


def _rows(root):
    return [{"text": TEXT, "images": [str(root / "img" / "a.png")]}]


def _clip(root, **kw):
    return [{"image_text_similarity_filter": {"hf_clip": str(root / "models" / "evil"), "trust_remote_code": True,
                                              "device": "cpu", **kw}}]


def _recipe(process):
    return {"project_name": "trust", "dataset_path": "data/rows.jsonl", "np": 1, "process": process}


@pytest.fixture(scope="module")
def server(root, tmp_path_factory):
    m = JobManager(str(tmp_path_factory.mktemp("trust-state")), [str(root)])
    with LiveServer(m) as s:
        yield s
    m.close()


@pytest.fixture(scope="module")
def scripts_server(root, tmp_path_factory):
    m = JobManager(str(tmp_path_factory.mktemp("trust-state-scripts")), [str(root)], allow_scripts=True)
    with LiveServer(m, allow_scripts=True) as s:
        yield s
    m.close()


@pytest.fixture(autouse=True)
def _empty_store(tmp_path, monkeypatch):
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path / "store"))


def test_rest_apply_refuses_trust_remote_code(server, root):
    with server.client() as c:
        r = c.post("/api/apply", json={"rows": _rows(root), "process": _clip(root)})
    assert r.status_code == 403, r.text
    err = r.json()["error"]
    assert "trust_remote_code" in err and "--allow-scripts" in err
    assert not _marker(root).exists()


def test_rest_validate_and_jobs_refuse_trust_remote_code(server, root):
    with server.client() as c:
        r = c.post("/api/recipes/validate", json={"recipe": _recipe(_clip(root))})
        assert r.status_code == 200 and r.json()["ok"] is False, r.text
        assert "trust_remote_code" in json.dumps(r.json()["errors"])
        before = c.get("/api/jobs").json()["jobs"]
        r = c.post("/api/jobs", json={"recipe": _recipe(_clip(root))})
        assert r.status_code in (400, 403), r.text
        assert "trust_remote_code" in r.text
        assert c.get("/api/jobs").json()["jobs"] == before
    assert not _marker(root).exists()


@pytest.mark.parametrize("case", ["outside", "symlink", "relative", "dotted", "tokenizer", "stopwords", "save_dir"])
def test_rest_apply_refuses_paths_outside_the_roots(server, root, case):
    out = _outside(root)
    process = {
        "outside": [{"image_text_similarity_filter": {"hf_clip": str(out / "evil"), "device": "cpu"}}],
        "symlink": [{"image_nsfw_filter": {"hf_nsfw_model": str(root / "link-out" / "evil"), "device": "cpu"}}],
        # relative op paths are taken from the first data root (as the recipe's own paths): one that climbs
        # out of it is refused
        "relative": [{"image_captioning_mapper": {"hf_img2seq": os.path.relpath(out / "evil", root) + "/",
                                                  "device": "cpu"}}],
        "dotted": [{"image_text_similarity_filter": {"hf_clip": "./models/../" + os.path.relpath(out / "evil", root),
                                                     "device": "cpu"}}],
        "tokenizer": [{"token_num_filter": {"hf_tokenizer": str(out / "tokenizer.json")}}],
        "stopwords": [{"stopwords_filter": {"stopwords_dir": str(out)}}],
        "save_dir": [{"image_blur_mapper": {"save_dir": str(out / "produced")}}],
    }[case]
    with server.client() as c:
        r = c.post("/api/apply", json={"rows": _rows(root), "process": process})
    assert r.status_code == 403, r.text
    msg = r.json()["error"]
    assert "outside the server's data roots" in msg or "relative" in msg
    assert not _marker(root).exists() and not (out / "produced").exists()


def test_rest_store_names_pass_the_path_check(server, root):
    """A Hugging Face repo id is a model-store name: not a path, so not refused; the (empty) store says so."""
    with server.client() as c:
        r = c.post("/api/apply", json={"rows": _rows(root), "process": [
            {"image_text_similarity_filter": {"hf_clip": "openai/clip-vit-base-patch32", "device": "cpu"}}]})
    assert r.status_code == 400, r.text
    assert "model store" in r.json()["error"] and "outside" not in r.json()["error"]


def test_allow_scripts_lifts_the_code_refusal_not_the_path_checks(scripts_server, root):
    with scripts_server.client() as c:
        # no image in the row: the op is built (the switch allowed), the model never loads
        r = c.post("/api/apply", json={"rows": [{"text": "no image here"}], "process": _clip(root)})
        assert r.status_code == 200, r.text
        assert r.json()["rows"] == [{"text": "no image here"}] or r.json()["ops"][0]["rows_out"] == 1
        r = c.post("/api/recipes/validate", json={"recipe": _recipe(_clip(root))})
        assert r.json()["ok"] is True, r.text
        r = c.post("/api/apply", json={"rows": _rows(root), "process": _clip(root, hf_clip=str(_outside(root) / "evil"))})
        assert r.status_code == 403 and "outside the server's data roots" in r.json()["error"]
    assert not _marker(root).exists()


# -- MCP: a `gristmill mcp` over stdio, as in test_mcp.py ----------------------------------------------------
@pytest.fixture(scope="module")
def mcp_server(root):
    pytest.importorskip("mcp")
    from mcp import StdioServerParameters
    from test_mcp import StdioSession
    state = root.parent / (root.name + "-mcp-state")
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "gristmill.cli", "mcp", "--data-root", str(root),
                                         "--state-dir", str(state)],
                                   env=dict(os.environ, GRISTMILL_MODELS=str(state / "store")), cwd=str(root))
    with open(root.parent / (root.name + "-mcp-stderr.log"), "w") as errlog:
        s = StdioSession(params, errlog)
        try:
            yield s
        finally:
            s.close()


def test_mcp_refuses_trust_remote_code(mcp_server, root):
    import yaml
    err, body = mcp_server.tool("apply_ops", {"rows": _rows(root), "process": _clip(root)})
    assert err and "trust_remote_code" in json.dumps(body["errors"]), body
    assert "--allow-scripts" in body["errors"][0]["message"]
    recipe = yaml.safe_dump(_recipe(_clip(root)))
    err, body = mcp_server.tool("validate_recipe", {"recipe_yaml": recipe})
    assert not err and body["ok"] is False and "trust_remote_code" in json.dumps(body["errors"])
    err, body = mcp_server.tool("run_recipe", {"recipe_yaml": recipe})
    assert err and "trust_remote_code" in json.dumps(body["errors"])
    assert not _marker(root).exists()


def test_mcp_apply_ops_checks_model_paths(mcp_server, root):
    out = _outside(root)
    for process in ([{"image_text_similarity_filter": {"hf_clip": str(out / "evil"), "device": "cpu"}}],
                    [{"image_watermark_filter": {"hf_watermark_model": str(root / "link-out" / "evil")}}],
                    [{"stopwords_filter": {"stopwords_dir": str(out)}}]):
        err, body = mcp_server.tool("apply_ops", {"rows": _rows(root), "process": process})
        assert err and "outside the server's data roots" in body["errors"][0]["message"], body
    assert not _marker(root).exists()


def test_relative_op_paths_are_taken_from_the_first_root(server, root):
    """A relative op path is made absolute against the first data root (as the recipe's dataset paths are),
    then checked: a stopwords dir inside the root works through apply, from any server working directory."""
    (root / "words").mkdir(exist_ok=True)
    (root / "words" / "stopwords.json").write_text(json.dumps({"en": ["the", "and", "of"]}), encoding="utf-8")
    with server.client() as c:
        r = c.post("/api/apply", json={"rows": [{"text": "the cat and the dog of the house"}],
                                       "process": [{"stopwords_filter": {"stopwords_dir": "words", "lang": "en",
                                                                         "min_ratio": 0.1}}]})
    assert r.status_code == 200, r.text
    assert r.json()["ops"][0]["rows_out"] == 1


@pytest.mark.parametrize("params", [
    {"filter_name": "movie", "filter_kwargs": {"filename": "/etc/passwd"}},
    {"filter_name": "scale", "filter_kwargs": {"w": 10, "h": 10}, "global_args": ["-i", "/etc/passwd"]},
    {"filter_name": "drawtext", "filter_kwargs": {"textfile": "/etc/passwd"}},
    {"filter_name": "subtitles", "filter_kwargs": {"f": "/etc/passwd"}},
])
def test_ffmpeg_arguments_that_can_name_files_need_allow_scripts(params, tmp_path):
    """Raw ffmpeg arguments and filters that read files or load plugins are refused under the service's
    policy (kept at their defaults) unless code is allowed; the defaults themselves pass."""
    from gristmill.core import trust
    from gristmill.registry import create_op
    with trust.active(trust.service_policy([tmp_path])):
        with pytest.raises(PermissionError, match="--allow-scripts"):
            create_op("video_ffmpeg_wrapped_mapper", params, "process[0]")
        create_op("video_ffmpeg_wrapped_mapper", {"filter_name": "scale", "filter_kwargs": {"w": 10, "h": 10}})
        create_op("video_split_by_scene_mapper", {})  # its default ffmpeg arguments
        with pytest.raises(PermissionError, match="raw ffmpeg arguments"):
            create_op("video_split_by_scene_mapper", {"ffmpeg_extra_args": "-i /etc/passwd"})
    with trust.active(trust.service_policy([tmp_path], allow_code=True)):
        create_op("video_ffmpeg_wrapped_mapper", params, "process[0]")
