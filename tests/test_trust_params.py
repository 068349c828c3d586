"""Op params that name files, directories or models are declared (``trust.path_param``), and the service's
policy checks them when an op is built: inside the data roots after symlinks, no relative paths, bare model
store names allowed, ``trust_remote_code`` only with ``allow_code`` (issue 23, finding 1)."""
from __future__ import annotations

import json
import os
import re

import pytest

from gristmill import models
from gristmill.core import trust
from gristmill.registry import OpError, all_ops, create_op

# a param whose name says "file / directory / model" must be declared with a path kind, or be listed here
PATHLIKE = re.compile(r"(^|_)(path|paths|dir|dirs|file|files)$|^hf_|model|tokenizer|^save_|template|blocklist|"
                      r"classifier|stopwords|lists?$")
NOT_PATHS = {  # (op, param): why it names no file
    ("video_motion_score_ptlflow_filter", "model_name"): "a ptlflow model name: only names the default export file",
    ("video_motion_score_ptlflow_filter", "get_model_args"): "ptlflow's model args, baked into an export: unused",
    ("video_human_tracks_extraction_mapper", "tag_field_name_human_track_path"): "the name of a meta field",
    ("video_active_speaker_detect_mapper", "temp_save_path"): "Data-Juicer's scratch directory, accepted and unused",
    ("video_captioning_from_human_tracks_mapper", "temp_video_path"): "Data-Juicer's scratch directory, accepted and "
                                                                      "unused",
    ("video_captioning_face_attribute_emotion_mapper", "cropping_face_video_temp_path"): "Data-Juicer's scratch "
                                                                                         "directory, accepted and unused",
    **{(op, p): "accepted for Data-Juicer recipes and never opened: the model's export holds it"
       for op, ps in (("image_sam_3d_body_mapper", ("mhr_path", "detector_path", "segmentor_path", "fov_path")),
                      ("video_hand_reconstruction_hawor_mapper", ("hawor_config_path", "hawor_detector_path",
                                                                  "mano_right_path", "mano_left_path")),
                      ("video_hand_reconstruction_mapper", ("wilor_model_config", "detector_model_path",
                                                            "mano_right_path")))
       for p in ps},
    ("chat_template_mapper", "template"): "a built-in template name (chatml, llama3, custom, tokenizer)",
    ("chat_template_mapper", "template_name"): "the name of a template inside the tokenizer's config",
    ("extract_json_field_mapper", "path"): "a dotted path inside a row's JSON value",
    ("ray_bts_minhash_deduplicator", "tokenizer_model"): "typed None: must be unset",
    ("ray_bts_minhash_deduplicator_with_uid", "tokenizer_model"): "typed None: must be unset",
    ("ray_bts_minhash_cpp_deduplicator", "tokenizer_model"): "typed None: must be unset",
    ("general_fused_op", "fused_op_list"): "a process list: each inner op's own params are checked when it is built",
    ("url_filter", "use_integrated_lists"): "a switch for the shipped lists",
    ("download_file_mapper", "save_field"): "names a field",
    ("video_split_by_duration_mapper", "save_field"): "names a field",
    ("video_split_by_key_frame_mapper", "save_field"): "names a field",
    ("video_split_by_scene_mapper", "save_field"): "names a field",
    # declared by the per-row download change of issue 23 (ops/web/download_file.py); drop once it is
    ("download_file_mapper", "save_dir"): "declared in ops/web/download_file.py (issue 23, per-row checks)",
    ("s3_download_file_mapper", "save_field"): "names a field",
    ("agent_bad_case_signal_mapper", "min_medium_signals_for_watchlist"): "a count",
    ("image_ohem_selector", "model_factory"): "a callable's name inside score_file (user code, allow_scripts)",
    ("image_ohem_selector", "model_function"): "a callable's name inside score_file (user code, allow_scripts)",
    ("image_ohem_selector", "model_kwargs"): "keyword arguments for model_factory",
    ("image_tagging_vlm_mapper", "is_api_model"): "a switch",
    ("ngram_decontamination_filter", "word_tokenizer"): "a choice (whitespace | spacy)",
    ("pii_llm_suspect_mapper", "spacy_ner_model"): "a spaCy package name, or a directory the op checks with "
                                                   "trust.check_read itself",
    ("pii_llm_suspect_mapper", "spacy_ner_models"): "spaCy package names, or directories the op checks with "
                                                    "trust.check_read itself",
    ("text_tagging_by_prompt_mapper", "tag_list"): "the tags offered to the model",
    ("text_tagging_by_prompt_mapper", "max_model_len"): "a length",
    **{(op, p): why for op in ("in_context_influence_filter", "instruction_following_difficulty_filter")
       for p, why in (("model_params", "keyword arguments for the model's loading"),
                      ("query_template", "a prompt template"), ("response_template", "a prompt template"))},
    **{(op, p): "keyword arguments for the model's loading"
       for op in ("query_intent_detection_mapper", "query_sentiment_detection_mapper", "query_topic_detection_mapper")
       for p in ("model_params", "zh_to_en_model_params")},
}
# the LLM ops' params (gristmill/ops/llm): prompts and names, no file; the one that can name a local model is
# checked by the op itself when it is loaded in the worker
LLM_PARAMS = {
    "response_path": "a dotted path inside the endpoint's JSON answer (Data-Juicer's)",
    "model_params": "params sent with each request (temperature, ...)",
    "api_model": "the model name sent in each request",
    "hf_model": "the model name sent in each request (the served model)",
    "api_or_hf_model": "the model name sent in each request; with is_hf_model the op checks it as a model "
                       "path itself (ops/llm/_api.py, trust.check_read unless a store name)",
    "is_hf_model": "a switch",
}


# ops outside ops/llm that ask an endpoint through the LLM client (same params, same story)
LLM_CLIENT_OPS = ("gristmill.ops.agent.trace_quality", "gristmill.ops.text.embd_similarity")


def _llm_explained(cls, p: str) -> bool:
    return (cls.__module__.startswith("gristmill.ops.llm.") or cls.__module__ in LLM_CLIENT_OPS) \
        and (p in LLM_PARAMS or p.endswith("_template"))


# the params of the audit's finding 1 and their kinds: a check that the sweep found them
EXPECTED = {
    ("image_text_similarity_filter", "hf_clip"): "model", ("image_pair_similarity_filter", "hf_clip"): "model",
    ("video_frames_text_similarity_filter", "hf_clip"): "model", ("image_nsfw_filter", "hf_nsfw_model"): "model",
    ("image_watermark_filter", "hf_watermark_model"): "model", ("image_captioning_mapper", "hf_img2seq"): "model",
    ("image_aesthetics_filter", "hf_scorer_model"): "model", ("token_num_filter", "hf_tokenizer"): "model",
    ("alphanumeric_filter", "hf_tokenizer"): "model", ("perplexity_filter", "model_path"): "model",
    ("perplexity_filter", "sp_model_path"): "model", ("language_id_score_filter", "model_path"): "model",
    ("text_chunk_mapper", "tokenizer"): "model", ("chat_template_mapper", "tokenizer"): "model",
    ("stopwords_filter", "stopwords_dir"): "read", ("flagged_words_filter", "flagged_words_dir"): "read",
    ("c4_badwords_filter", "badwords_dir"): "read", ("url_filter", "domains_file"): "read",
    ("url_filter", "blocklist_dir"): "read", ("python_file_mapper", "file_path"): "read",
    ("document_minhash_deduplicator", "reference_signatures_path"): "read",
    ("document_minhash_deduplicator", "save_signatures_path"): "write", ("image_blur_mapper", "save_dir"): "write",
    ("image_face_blur_mapper", "save_dir"): "write", ("video_extract_frames_mapper", "frame_dir"): "write",
    ("video_split_by_scene_mapper", "save_dir"): "write", ("audio_ffmpeg_wrapped_mapper", "save_dir"): "write",
}


def _ops():
    return {n: c for n, c in all_ops().items() if c.__module__.startswith("gristmill.")}


def test_every_pathlike_param_is_declared_or_explained():
    missing = []
    for name, cls in sorted(_ops().items()):
        declared = trust.path_params(cls.Params)
        for p in cls.Params.model_fields:
            if p.endswith("_key"):  # names a field of the rows
                continue
            if PATHLIKE.search(p) and p not in declared and (name, p) not in NOT_PATHS \
                    and not _llm_explained(cls, p):
                missing.append(f"{name}.{p}")
    assert not missing, ("declare these with trust.path_param(read|write|model, ...) or add them to NOT_PATHS "
                         f"with the reason: {missing}")


def test_the_allow_list_holds_no_declared_or_gone_params():
    ops = _ops()
    for (name, p), why in NOT_PATHS.items():
        assert why
        if name == "download_file_mapper" and p == "save_dir":
            continue  # declared there or not yet: either is fine for this list
        assert name in ops and p in ops[name].Params.model_fields, (name, p)
        assert p not in trust.path_params(ops[name].Params), f"{name}.{p} is declared now: drop it from NOT_PATHS"


def test_path_params_finds_the_declared_kinds():
    ops = _ops()
    for (name, p), kind in EXPECTED.items():
        assert trust.path_params(ops[name].Params).get(p) == kind, (name, p)
    for name, cls in ops.items():
        for p, kind in trust.path_params(cls.Params).items():
            assert kind in trust.PATH_KINDS
            schema = cls.Params.model_json_schema()["properties"][p]
            assert schema[trust.PATH_KEY] == kind, (name, p)  # what the schema (and a UI) shows


@pytest.fixture()
def root(tmp_path):
    r = tmp_path / "root"
    (r / "lists").mkdir(parents=True)
    (r / "lists" / "domains.txt").write_text("bad.example\n")
    out = tmp_path / "outside"
    out.mkdir()
    (out / "domains.txt").write_text("bad.example\n")
    (out / "stopwords.json").write_text(json.dumps({"xx": ["secret"]}))
    os.symlink(out, r / "link-out")
    return r


def _build(name, params):
    with models.unchecked():
        return create_op(name, params, "process[0]")


def test_service_policy_checks_declared_params(root):
    out = root.parent / "outside"
    pol = trust.service_policy([root])
    with trust.active(pol):
        assert _build("url_filter", {"domains_file": str(root / "lists" / "domains.txt")})
        for bad in (str(out / "domains.txt"), str(root / "link-out" / "domains.txt"), "lists/domains.txt",
                    str(root / "lists" / ".." / ".." / "outside" / "domains.txt")):
            with pytest.raises(trust.Refused, match="domains_file"):
                _build("url_filter", {"domains_file": bad})
        # a list of paths: each one is checked
        with pytest.raises(trust.Refused, match="reference_signatures_path"):
            _build("document_minhash_deduplicator",
                   {"reference_signatures_path": [str(root / "a.parquet"), str(out / "b.parquet")]})
        # write params: a file that does not exist yet, inside is fine, outside is not
        assert _build("document_minhash_deduplicator", {"save_signatures_path": str(root / "new" / "s.parquet")})
        with pytest.raises(trust.Refused, match="save_dir"):
            _build("image_blur_mapper", {"save_dir": str(out / "produced")})
        with pytest.raises(trust.Refused, match="save_dir"):
            _build("image_blur_mapper", {"save_dir": "produced"})  # relative: the server's working directory
        # model params: a store name passes the path check, a path must be inside
        assert _build("language_id_score_filter", {"model_path": "lid.176.bin"})
        assert _build("perplexity_filter", {"lang": "en"})
        with pytest.raises(trust.Refused, match="model_path"):
            _build("perplexity_filter", {"model_path": str(out / "en.arpa.bin")})
        with pytest.raises(trust.Refused, match="hf_tokenizer"):
            _build("token_num_filter", {"hf_tokenizer": str(out)})
        with pytest.raises(trust.Refused, match="tokenizer"):
            _build("text_chunk_mapper", {"tokenizer": "./tok/tokenizer.json", "max_len": 10})
    # the open policy (CLI, Python API): anything goes, as before
    assert _build("url_filter", {"domains_file": str(out / "domains.txt")})


def test_the_check_comes_before_the_op_opens_anything(root):
    """stopwords_filter reads its word lists when built: under the policy an outside directory is refused
    before it is listed (no 'have: [...]' naming what is there)."""
    out = root.parent / "outside"
    with pytest.raises(OpError, match=r"no stopwords list for lang 'en' \(have: .*'xx'"):
        _build("stopwords_filter", {"stopwords_dir": str(out)})  # open policy: read, as before
    with trust.active(trust.service_policy([root])):
        with pytest.raises(trust.Refused) as e:
            _build("stopwords_filter", {"stopwords_dir": str(out)})
    assert "outside the server's data roots" in str(e.value) and "xx" not in str(e.value)


def test_trust_remote_code_needs_allow_code(root):
    with trust.active(trust.service_policy([root])):
        for name, extra in (("image_text_similarity_filter", {}), ("image_nsfw_filter", {}),
                            ("image_aesthetics_filter", {}), ("text_chunk_mapper", {"max_len": 10})):
            with pytest.raises(trust.Refused, match="trust_remote_code.*--allow-scripts"):
                _build(name, {"trust_remote_code": True, **extra})
        assert trust.remote_code_allowed(False) is False
        with pytest.raises(trust.Refused):
            trust.remote_code_allowed(True)
    with trust.active(trust.service_policy([root], allow_code=True)):
        assert _build("image_text_similarity_filter", {"trust_remote_code": True})
        assert trust.remote_code_allowed(True) is True
        with pytest.raises(trust.Refused, match="hf_clip"):  # --allow-scripts widens code, not paths
            _build("image_text_similarity_filter", {"hf_clip": str(root.parent / "outside")})


def test_store_names_that_are_paths_are_never_looked_up(tmp_path, monkeypatch):
    store = tmp_path / "store"
    store.mkdir()
    monkeypatch.setenv("GRISTMILL_MODELS", str(store))
    (tmp_path / "evil.arpa.bin").write_text("x")
    (store / "en.arpa.bin").write_text("x")
    assert models.find("en.arpa.bin") == store / "en.arpa.bin"
    for name in ("../evil.arpa.bin", f"{tmp_path}/evil.arpa.bin", ".hidden.arpa.bin", "..\\evil.arpa.bin"):
        assert models.find(name) is None, name  # e.g. perplexity_filter's {lang}.arpa.bin with lang '../evil'
    with pytest.raises(models.ModelMissing):
        models.resolve("../evil.arpa.bin")


def test_model_dirs_are_checked_where_they_are_resolved(root, tmp_path):
    from gristmill.media import inference as inf
    out = root.parent / "outside"
    (out / "config.json").write_text("{}")
    with trust.active(trust.service_policy([root])):
        with pytest.raises(trust.Refused, match="hf_clip"):
            inf.check_ref(str(out), "hf_clip")
        with pytest.raises(trust.Refused, match="hf_clip"):  # before it looks: no "not a model directory"
            inf.check_ref(str(out / "missing"), "hf_clip")
        with pytest.raises(trust.Refused):
            inf.model_dir(str(out))
        with pytest.raises(trust.Refused):
            inf.model_dir(str(root / "link-out"))
        assert inf.model_dir(str(root / "lists")) == str(root / "lists")
    assert inf.model_dir(str(out)) == str(out)
