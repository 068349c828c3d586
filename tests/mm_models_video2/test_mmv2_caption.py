"""video_captioning_from_frames_mapper / _from_video_mapper / _from_summarizer_mapper on tiny random models saved to
disk: Data-Juicer's layouts (legacy chunks, rewrite, keep_origin), captions equal to the models' own seeded
generation, Video-BLIP's Q-Former reading every frame, the summarizer composing its sub-ops."""
import json
from pathlib import Path
from typing import List

import numpy as np
import pytest
import torch
from PIL import Image

from gristmill.media.frames import uniform_frames
from gristmill.registry import OpError, create_op
from mm_models_util import apply, build_blip, byte_chars, write_video

V, E = "<__dj__video>", "<|__dj__eoc|>"
TOK = 3


def build_blip2(d: Path, seed: int = 0, image_token: bool = True) -> Path:
    """A tiny Blip2ForConditionalGeneration (OPT language model) with a byte-level GPT-2 tokenizer; without
    ``image_token`` the tokenizer has none and the config no image_token_index (as Video-BLIP's checkpoint: the
    processor adds ``<image>`` after the vocabulary, id 258)."""
    from transformers import (Blip2Config, Blip2ForConditionalGeneration, Blip2Processor, BlipImageProcessor,
                              GPT2Tokenizer, OPTConfig)
    d.mkdir(parents=True, exist_ok=True)
    vocab = {c: i for i, c in enumerate(byte_chars())}
    vocab.update({"<pad>": 256, "</s>": 257, **({"<image>": 258} if image_token else {})})
    (d / "vocab.json").write_text(json.dumps(vocab))
    (d / "merges.txt").write_text("#version: 0.2\n")
    tok = GPT2Tokenizer(str(d / "vocab.json"), str(d / "merges.txt"), bos_token="</s>", eos_token="</s>",
                        pad_token="<pad>", unk_token="</s>")
    if image_token:
        tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
        tok.image_token = "<image>"
    Blip2Processor(image_processor=BlipImageProcessor(size={"height": 32, "width": 32}), tokenizer=tok,
                   num_query_tokens=4).save_pretrained(d)
    torch.manual_seed(seed)
    small = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2)
    text = OPTConfig(vocab_size=259, hidden_size=32, ffn_dim=64, num_hidden_layers=1, num_attention_heads=2,
                     word_embed_proj_dim=32, max_position_embeddings=64, pad_token_id=256, bos_token_id=257,
                     eos_token_id=257).to_dict()
    cfg = Blip2Config(vision_config=dict(small, image_size=32, patch_size=8),
                      qformer_config=dict(small, encoder_hidden_size=32, vocab_size=100), text_config=text,
                      num_query_tokens=4, image_token_index=258 if image_token else None)
    Blip2ForConditionalGeneration(cfg).save_pretrained(d)
    return d


def build_t5(d: Path, seed: int = 0) -> Path:
    """A tiny T5ForConditionalGeneration with a BERT word-piece tokenizer."""
    from transformers import BertTokenizer, T5Config, T5ForConditionalGeneration
    d.mkdir(parents=True, exist_ok=True)
    words = "red green bright dark thing a the video of cat".split()
    (d / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
                                           + list("abcdefghijklmnopqrstuvwxyz,.")) + "\n")
    BertTokenizer(str(d / "vocab.txt")).save_pretrained(d)
    torch.manual_seed(seed)
    T5ForConditionalGeneration(T5Config(vocab_size=48, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=2,
                                        decoder_start_token_id=0, pad_token_id=0, eos_token_id=3)).save_pretrained(d)
    return d


class Tagger(torch.nn.Module):
    """RAM-style tag strings: red or green by channel means, then fixed words."""

    def forward(self, x: torch.Tensor) -> List[str]:
        m = x.mean(dim=(2, 3))
        out: List[str] = []
        for i in range(x.shape[0]):
            out.append(("red" if m[i, 0] > m[i, 1] else "green") + " | thing | dark | bright")
        return out


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("cap")
    rs = np.random.RandomState(0)
    vids = []
    for k in range(2):
        frames = [np.clip(rs.randint(0, 256, (32, 40, 3)) * 0.5 + 60 * k + 10 * i, 0, 255).astype(np.uint8)
                  for i in range(6)]
        vids.append(write_video(d / f"v{k}.mp4", frames, fps=10, gop=3))
    tagger = d / "ram.pt"
    torch.jit.save(torch.jit.script(Tagger()), str(tagger))
    return {"blip": build_blip(d / "blip"), "blip2": build_blip2(d / "blip2"), "t5": build_t5(d / "t5"),
            "videos": vids, "tagger": str(tagger), "dir": d}


def blip_captions(blip_dir, frames, seed, prompt=None):
    from transformers import BlipForConditionalGeneration, BlipProcessor
    model = BlipForConditionalGeneration.from_pretrained(blip_dir).eval()
    proc = BlipProcessor.from_pretrained(blip_dir)
    torch.manual_seed(seed)
    inputs = proc(images=frames, text=None if prompt is None else [prompt] * len(frames), return_tensors="pt")
    with torch.no_grad():
        ids = model.generate(**inputs, max_new_tokens=TOK, do_sample=True)
    return ". ".join(s.strip() for s in proc.batch_decode(ids, skip_special_tokens=True))


def test_frames_legacy_layout(env):
    v0, v1 = env["videos"]
    rows = [{"id": "a", "text": f"{V} one {E}{V} two {E}", "videos": [v0, v1]},
            {"id": "b", "text": "no videos", "videos": []}]
    kept, removed, rej = apply("video_captioning_from_frames_mapper", rows, hf_img2seq=str(env["blip"]),
                               frame_sampling_method="uniform", frame_num=2, max_new_tokens=TOK, seed=3)
    assert not rej and not removed
    assert [r["id"] for r in kept] == ["a", "a#caption", "b"]
    caps = [blip_captions(env["blip"], [f.convert("RGB") for f in uniform_frames(v, 2)], 3) for v in (v0, v1)]
    assert all(". " in c for c in caps)
    assert kept[1]["text"] == f"{V} {caps[0]} {E}{V} {caps[1]} {E}"
    assert kept[0]["text"] == rows[0]["text"] and kept[1]["videos"] == [v0, v1]


def test_frames_rewrite_keep_origin_frame_field_flip(env):
    v0 = env["videos"][0]
    fr = uniform_frames(v0, 3)
    paths = []
    for i, f in enumerate(fr):
        paths.append(str(env["dir"] / f"frame{i}.png"))
        f.save(paths[-1])
    rows = [{"id": 1, "text": "hello", "videos": [v0], "frames": [paths], "p": "a photo of"}]
    common = dict(hf_img2seq=str(env["blip"]), legacy_split_by_text_token=False, keep_original_sample=False,
                  frame_field="frames", frame_num=2, max_new_tokens=TOK, prompt_key="p", horizontal_flip=True)
    from PIL import ImageOps
    picked = [ImageOps.mirror(Image.open(paths[i]).convert("RGB")) for i in (0, 2)]
    want = blip_captions(env["blip"], picked, 0, prompt="a photo of")
    kept, _, rej = apply("video_captioning_from_frames_mapper", rows, **common)
    assert not rej and [r["id"] for r in kept] == ["1#caption"] and kept[0]["text"] == f"{V}{want}{E}"
    kept, _, rej = apply("video_captioning_from_frames_mapper", rows, caption_field="caps",
                         text_update_strategy="keep_origin", **common)
    assert not rej and kept[0]["text"] == "hello" and kept[0]["caps"] == [want]
    with pytest.raises(OpError, match="caption_field is required"):
        create_op("video_captioning_from_frames_mapper", {"hf_img2seq": str(env["blip"]),
                                                          "text_update_strategy": "keep_origin"})
    with pytest.raises(OpError, match="only one of caption_field and keep_original_sample"):
        create_op("video_captioning_from_frames_mapper", {"hf_img2seq": str(env["blip"]), "caption_field": "c"})


def test_video_blip_reads_every_frame(env):
    from gristmill.ops.video.model_caption import VideoBlip
    vb = VideoBlip(str(env["blip2"]), "cpu", False, TOK)
    frames = [f.convert("RGB") for f in uniform_frames(env["videos"][1], 3)]
    px = vb.processor(images=frames, return_tensors="pt")["pixel_values"]  # (T, C, H, W)
    with torch.no_grad():
        got = vb.model.get_image_features(pixel_values=px.unsqueeze(0).permute(0, 2, 1, 3, 4)).pooler_output
        emb = vb.model.vision_model.inner(pixel_values=px).last_hidden_state  # (T, patches, hidden)
        flat = emb.reshape(1, -1, emb.shape[-1])  # Video-BLIP: all frames' patches, one sequence
        q = vb.model.qformer(query_embeds=vb.model.query_tokens, encoder_hidden_states=flat,
                             encoder_attention_mask=torch.ones(flat.shape[:2], dtype=torch.long)).last_hidden_state
        want = vb.model.language_projection(q)
    assert got.shape == (1, 4, 32) and torch.allclose(got, want, atol=1e-5)
    rows = [{"id": "7", "text": f"{V} clip", "videos": [env["videos"][1]]}]
    kept, _, rej = apply("video_captioning_from_video_mapper", rows, hf_video_blip=str(env["blip2"]),
                         frame_sampling_method="uniform", frame_num=3, max_new_tokens=TOK, seed=5, caption_num=2,
                         keep_candidate_mode="all")
    assert not rej and [r["id"] for r in kept] == ["7", "7#caption0", "7#caption1"]
    caps = [vb.caption(frames, None, 5), vb.caption(frames, None, 6)]
    assert [r["text"] for r in kept[1:]] == [f"{V} {c} {E}" for c in caps]


def test_summarizer_composes_sub_ops(env, tmp_path):
    from transformers import AutoTokenizer, T5ForConditionalGeneration
    v0, v1 = env["videos"]
    frm = dict(hf_img2seq=str(env["blip"]), frame_sampling_method="uniform", frame_num=1, max_new_tokens=2,
               caption_num=3, keep_original_sample=True)
    params = dict(hf_summarizer=str(env["t5"]), consider_video_caption_from_video=False,
                  consider_video_caption_from_audio=False, consider_video_tags_from_audio=False,
                  vid_cap_from_frm_args=frm, vid_tag_from_frm_args={"model_path": env["tagger"],
                                                                    "frame_sampling_method": "uniform"},
                  keep_tag_num=2, max_new_tokens=6)
    rows = [{"id": "s", "text": f"intro{E}{V}{V} both {E}", "videos": [v0, v1]}, {"id": "t", "text": "x", "videos": []}]
    kept, _, rej = apply("video_captioning_from_summarizer_mapper", rows, **params)
    assert not rej and [r["id"] for r in kept] == ["s", "s#caption", "t"]
    tags = []
    for v in (v0, v1):
        r = apply("video_tagging_from_frames_mapper", [{"videos": [v]}], model_path=env["tagger"],
                  frame_sampling_method="uniform")[0][0]["__meta__"]["video_frame_tags"][0]
        tags += r[:2]
    cap = apply("video_captioning_from_frames_mapper", [{"text": f"{V}{V} both ", "videos": [v0, v1]}],
                **dict(frm, caption_num=1, keep_original_sample=False))[0][0]["text"]
    joined = ", ".join(tags + [cap.replace(V, "").replace(E, "").strip()])
    tok = AutoTokenizer.from_pretrained(env["t5"])
    model = T5ForConditionalGeneration.from_pretrained(env["t5"]).eval()
    with torch.no_grad():
        out = model.generate(tok(joined, return_tensors="pt").input_ids, max_new_tokens=6)
    summary = tok.decode(out[0], skip_special_tokens=True)
    assert kept[1]["text"] == f"intro{E}{V}{V} {summary}{E}"
    op = create_op("video_captioning_from_summarizer_mapper", params)
    assert [type(o).__name__ for o in op.tag_ops + op.cap_ops] == ["VideoTaggingFromFramesMapper",
                                                                  "VideoCaptioningFromFramesMapper"]
    assert op.cap_ops[0].params.caption_num == 1 and not op.cap_ops[0].params.keep_original_sample


def test_video_blip_checkpoint_without_image_token(env, tmp_path):
    """The processor adds <image> (id 258) to a tokenizer without one; the model is told that id (Data-Juicer forces
    50265, the id this gets for its default checkpoint)."""
    from gristmill.ops.video.model_caption import VideoBlip
    d = build_blip2(tmp_path / "vb", image_token=False)
    assert json.loads((d / "config.json").read_text()).get("image_token_index") is None
    vb = VideoBlip(str(d), "cpu", False, TOK)
    assert vb.model.config.image_token_index == 258
    rows = [{"id": "1", "text": f"{V} clip", "videos": [env["videos"][0]]}]
    kept, _, rej = apply("video_captioning_from_video_mapper", rows, hf_video_blip=str(d), frame_num=2,
                         frame_sampling_method="uniform", max_new_tokens=TOK)
    frames = [f.convert("RGB") for f in uniform_frames(env["videos"][0], 2)]
    assert not rej and kept[1]["text"] == f"{V} {vb.caption(frames, None, 0)} {E}"
