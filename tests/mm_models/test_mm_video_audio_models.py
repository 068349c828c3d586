"""The audio-track model ops on videos written by the test (a tone with an AAC track at 22.05 kHz, so it is
resampled; a video without audio), with tiny random transformers models saved to disk (AST tagger, wav2vec2
emotion classifier, wav2vec2 CTC recogniser, audEERING's age/gender architecture): each op's meta equals the
same model run directly on the track the test decodes and resamples itself."""
import json
from fractions import Fraction

import numpy as np
import pytest
import torch

from gristmill.registry import create_op

transformers = pytest.importorskip("transformers")
av = pytest.importorskip("av")
librosa = pytest.importorskip("librosa")

SR = 22050


def write_video(path, audio: bool, seconds=1.0, freq=440.0):
    c = av.open(str(path), "w")
    v = c.add_stream("mpeg4", rate=10)
    v.width, v.height, v.pix_fmt = 64, 48, "yuv420p"
    a = c.add_stream("aac", rate=SR) if audio else None
    if a is not None:
        a.layout = "mono"
    for i in range(int(seconds * 10)):
        img = np.full((48, 64, 3), (i * 20) % 255, np.uint8)
        for p in v.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
            c.mux(p)
    for p in v.encode():
        c.mux(p)
    if a is not None:
        t = np.arange(int(seconds * SR)) / SR
        sig = (0.5 * np.sin(2 * np.pi * freq * t) + 0.1 * np.sin(2 * np.pi * 3 * freq * t)).astype(np.float32)
        for s in range(0, len(sig), 1024):
            fr = av.AudioFrame.from_ndarray(sig[None, s:s + 1024], format="fltp", layout="mono")
            fr.sample_rate, fr.pts, fr.time_base = SR, s, Fraction(1, SR)
            for p in a.encode(fr):
                c.mux(p)
        for p in a.encode():
            c.mux(p)
    c.close()
    return str(path)


def track16k(path):
    """The test's own reading: first audio stream, first channel, resampled with librosa."""
    with av.open(path) as c:
        s = c.streams.audio[0]
        y = np.concatenate([f.to_ndarray()[0] for f in c.decode(s) if f.pts is not None])
        sr = int(1 / s.time_base)
    return librosa.resample(y.astype(np.float32), orig_sr=sr, target_sr=16000)


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    d = tmp_path_factory.mktemp("v")
    return {"tone": write_video(d / "tone.mp4", True), "tone2": write_video(d / "tone2.mp4", True, freq=220.0),
            "mute": write_video(d / "mute.mp4", False)}


def w2v_config(**kw):
    return transformers.Wav2Vec2Config(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=32, conv_dim=(16, 16), conv_stride=(5, 4),
                                       conv_kernel=(10, 8), num_conv_pos_embeddings=16,
                                       num_conv_pos_embedding_groups=2, **kw)


def ctc_processor(d):
    vocab = {"<pad>": 0, "<unk>": 1, "|": 2, **{c: i + 3 for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}}
    (d / "vocab.json").write_text(json.dumps(vocab))
    tok = transformers.Wav2Vec2CTCTokenizer(str(d / "vocab.json"), pad_token="<pad>", unk_token="<unk>",
                                            word_delimiter_token="|")
    fe = transformers.Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=True, return_attention_mask=False)
    return transformers.Wav2Vec2Processor(feature_extractor=fe, tokenizer=tok), len(vocab)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    out = {}
    # AST tagger: label 0 "Speech" favoured by the bias, so the speech ops downstream run
    ast_cfg = transformers.ASTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                                     num_mel_bins=16, max_length=64, patch_size=16, frequency_stride=10,
                                     time_stride=10, id2label={0: "Speech", 1: "Music"},
                                     label2id={"Speech": 0, "Music": 1})
    ast = transformers.ASTForAudioClassification(ast_cfg)
    with torch.no_grad():
        ast.classifier.dense.bias[:] = torch.tensor([5.0, -5.0])
    out["ast"] = root / "ast"
    ast.save_pretrained(out["ast"])
    transformers.ASTFeatureExtractor(num_mel_bins=16, max_length=64).save_pretrained(out["ast"])
    # emotion classifier
    emo = transformers.Wav2Vec2ForSequenceClassification(w2v_config(
        num_labels=4, id2label={0: "neu", 1: "hap", 2: "ang", 3: "sad"},
        label2id={"neu": 0, "hap": 1, "ang": 2, "sad": 3}, classifier_proj_size=8))
    out["emo"] = root / "emo"
    emo.save_pretrained(out["emo"])
    transformers.Wav2Vec2FeatureExtractor(sampling_rate=16000).save_pretrained(out["emo"])
    # CTC recogniser
    out["asr"] = root / "asr"
    out["asr"].mkdir()
    proc, n = ctc_processor(out["asr"])
    transformers.Wav2Vec2ForCTC(w2v_config(vocab_size=n, pad_token_id=0)).save_pretrained(out["asr"])
    proc.save_pretrained(out["asr"])
    # age / gender
    from gristmill.ops.video._age_gender import AgeGenderModel
    out["ag"] = root / "ag"
    out["ag"].mkdir()
    proc, n = ctc_processor(out["ag"])
    AgeGenderModel(w2v_config(vocab_size=n, architectures=["AgeGenderModel"])).save_pretrained(out["ag"])
    proc.save_pretrained(out["ag"])
    return {k: str(v) for k, v in out.items()}


def test_audio_tagging_then_speech_ops(models, videos):
    rows = [{"videos": [videos["tone"], videos["mute"], videos["tone2"]]}, {"videos": []}]
    tag = create_op("video_tagging_from_audio_mapper", {"hf_ast": models["ast"], "device": "cpu"})
    out = tag.apply(rows)
    assert [r["__meta__"]["video_audio_tags"] for r in out] == [["Speech", "EMPTY", "Speech"], []]

    # the classifier run directly on the test's own track
    fe = transformers.AutoFeatureExtractor.from_pretrained(models["ast"])
    ast = transformers.ASTForAudioClassification.from_pretrained(models["ast"]).eval()
    y = track16k(videos["tone"])
    logits = ast(**fe(y, sampling_rate=16000, return_tensors="pt")).logits
    assert ast.config.id2label[int(logits.argmax())] == "Speech"

    emo = create_op("video_audio_speech_emotion_mapper", {"model_dir_emo": models["emo"], "device": "cpu"})
    out2 = emo.apply(out)
    m = transformers.Wav2Vec2ForSequenceClassification.from_pretrained(models["emo"]).eval()
    fe = transformers.Wav2Vec2FeatureExtractor.from_pretrained(models["emo"])
    want = [m.config.id2label[int(m(**fe(track16k(videos[k]), sampling_rate=16000, return_tensors="pt"))
                                   .logits.argmax())] for k in ("tone", "tone2")]
    assert out2[0]["__meta__"]["speech_emotion"] == [want[0], "", want[1]]  # EMPTY: not Speech
    assert out2[1]["__meta__"]["speech_emotion"] == []

    asr = create_op("video_audio_ASR_mapper", {"model_dir_ASR": models["asr"], "device": "cpu"})
    out3 = asr.apply(out2)
    proc = transformers.Wav2Vec2Processor.from_pretrained(models["asr"])
    ctc = transformers.Wav2Vec2ForCTC.from_pretrained(models["asr"]).eval()
    ids = ctc(**proc(track16k(videos["tone"]), sampling_rate=16000, return_tensors="pt")).logits.argmax(-1)[0]
    got = out3[0]["__meta__"]["speech_ASR"]
    assert got[0] == {"language": "", "asr": proc.decode(ids).strip()}
    assert got[1] == {"language": "", "asr": ""}

    ag = create_op("video_audio_detect_age_gender_mapper", {"hf_audio_mapper": models["ag"], "device": "cpu"})
    out4 = ag.apply(out3)
    from gristmill.ops.video._age_gender import AgeGenderModel
    model = AgeGenderModel.from_pretrained(models["ag"]).eval()
    x = transformers.Wav2Vec2Processor.from_pretrained(models["ag"])(track16k(videos["tone"]), sampling_rate=16000)
    _, age, gender = model(torch.from_numpy(np.asarray(x["input_values"][0]).reshape(1, -1)))
    res = out4[0]["__meta__"]["audio_speech_attribute"]
    assert res[0]["Age"] == [int(float(age[0, 0]) * 100)]
    assert res[0]["female"][0] == pytest.approx(float(gender[0, 0]), abs=1e-6)
    assert res[0]["male"][0] + res[0]["female"][0] + res[0]["child"][0] == pytest.approx(1.0, abs=1e-5)
    assert res[1] is None  # no audio
    # a set meta field is kept as it is
    again = tag.apply([{"videos": [videos["mute"]], "__meta__": {"video_audio_tags": ["Music"]}}])
    assert again[0]["__meta__"]["video_audio_tags"] == ["Music"]


def test_speech_ops_need_the_audio_tags(models, videos):
    emo = create_op("video_audio_speech_emotion_mapper", {"model_dir_emo": models["emo"], "device": "cpu"})
    with pytest.raises(ValueError, match="must run after video_tagging_from_audio_mapper"):
        emo.apply([{"videos": [videos["tone"]]}])
    kept = emo.apply([{"videos": [videos["tone"]], "__meta__": {"video_audio_tags": ["Music"]}}])
    assert kept[0]["__meta__"]["speech_emotion"] == [""]
    # tagged Speech but without an audio track: EMPTY
    silent = {"videos": [videos["mute"]], "__meta__": {"video_audio_tags": ["Speech"]}}
    assert emo.apply([dict(silent)])[0]["__meta__"]["speech_emotion"] == ["EMPTY"]
    asr = create_op("video_audio_ASR_mapper", {"model_dir_ASR": models["asr"], "device": "cpu"})
    assert asr.apply([dict(silent)])[0]["__meta__"]["speech_ASR"] == [{"language": "EMPTY", "asr": "EMPTY"}]
