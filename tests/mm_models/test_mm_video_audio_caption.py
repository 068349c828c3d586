"""video_captioning_from_audio_mapper with a tiny random Qwen2-Audio (word-level tokenizer with the audio tokens,
Whisper features) saved to disk: the new sample's captions equal the model's greedy generate on the test's own
16 kHz track, Data-Juicer's text layout (a video without audio dropped), originals kept or not, ids."""
import re
import sys
from pathlib import Path

import pytest
import torch

from gristmill.registry import create_op

transformers = pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parent))
from test_mm_video_audio_models import track16k, videos, write_video  # noqa: E402,F401

PROMPT = "<|audio_bos|><|AUDIO|><|audio_eos|>Generate the caption in English:"


@pytest.fixture(scope="module")
def qwen_audio(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    d = tmp_path_factory.mktemp("qa")
    words = ["[UNK]", "[PAD]", "</s>", "<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"] + \
        "generate the caption in english : a dog barks music plays loud soft".split()
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(pattern=r"<\|[a-zA-Z_]+\|>", behavior="isolated"), pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Punctuation()])
    tk.decoder = decoders.WordPiece(prefix="##")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]",
                                               eos_token="</s>",
                                               additional_special_tokens=["<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"])
    fe = transformers.WhisperFeatureExtractor(feature_size=16, sampling_rate=16000, chunk_length=2, n_fft=400,
                                              hop_length=160)
    transformers.Qwen2AudioProcessor(feature_extractor=fe, tokenizer=tok, chat_template=None).save_pretrained(d)
    cfg = transformers.Qwen2AudioConfig(
        audio_config=transformers.Qwen2AudioEncoderConfig(d_model=16, encoder_layers=1, encoder_attention_heads=2,
                                                          encoder_ffn_dim=32, num_mel_bins=16,
                                                          max_source_positions=100),
        text_config=transformers.Qwen2Config(vocab_size=len(words), hidden_size=16, intermediate_size=32,
                                             num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                             eos_token_id=2, pad_token_id=1, bos_token_id=2),
        audio_token_index=3)
    torch.manual_seed(0)
    transformers.Qwen2AudioForConditionalGeneration(cfg).save_pretrained(d)
    return str(d)


def direct_caption(model_dir, path, max_new_tokens):
    proc = transformers.AutoProcessor.from_pretrained(model_dir)
    model = transformers.Qwen2AudioForConditionalGeneration.from_pretrained(model_dir).eval()
    x = proc(text=PROMPT, audio=[track16k(path)], sampling_rate=16000, return_tensors="pt")
    out = model.generate(**x, max_new_tokens=max_new_tokens, do_sample=False)
    text = proc.batch_decode(out[:, x["input_ids"].shape[1]:], skip_special_tokens=True)[0]
    return re.sub(r"<\|.*?\|>", "", text).strip()


def test_captions_from_audio(qwen_audio, videos):  # noqa: F811
    op = create_op("video_captioning_from_audio_mapper", {"hf_audio_model": qwen_audio, "device": "cpu",
                                                          "max_new_tokens": 6})
    text = "<__dj__video> a clip <|__dj__eoc|><__dj__video><__dj__video> two more"
    rows = [{"id": "a", "text": text, "videos": [videos["tone"], videos["mute"], videos["tone2"]]},
            {"id": "b", "text": "no video", "videos": []}]
    out = op.apply(rows)
    c1, c2 = direct_caption(qwen_audio, videos["tone"], 6), direct_caption(qwen_audio, videos["tone2"], 6)
    assert c1 and c2  # the tiny model says something (else the video would be dropped)
    assert [r["id"] for r in out] == ["a", "a#caption", "b"]
    assert out[0] == rows[0] and out[2] == rows[1]
    assert out[1]["text"] == f"<__dj__video> {c1}<|__dj__eoc|><__dj__video> {c2}<|__dj__eoc|>"
    assert out[1]["videos"] == [videos["tone"], videos["tone2"]]  # the mute video has no caption
    only_new = create_op("video_captioning_from_audio_mapper", {"hf_audio_model": qwen_audio, "device": "cpu",
                                                                "max_new_tokens": 6, "keep_original_sample": False})
    assert only_new.apply(rows) == [out[1]]
