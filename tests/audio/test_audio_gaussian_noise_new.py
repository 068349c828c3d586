"""audio_add_gaussian_noise_mapper on the bundled audios (tests/data/av): the noise added is white Gaussian
of an amplitude within range, seeded per audio (same output for the same audio, whatever the rows)."""
import wave
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from gristmill.core.fused import FusedOp
from gristmill.media import audio
from gristmill.registry import create_op

AV = Path(__file__).resolve().parents[1] / "data" / "av"
SINE, NOISE, OGG = str(AV / "sine_440_1.5s.wav"), str(AV / "noise_1s.flac"), str(AV / "tone_noise_2s.ogg")


def run(rows, **params):
    res = FusedOp([create_op("audio_add_gaussian_noise_mapper", params)]).run_batch(pa.RecordBatch.from_pylist(rows))
    return res.batch.to_pylist(), res.rejects


def read_wav(path):
    with wave.open(path) as w:
        assert (w.getnchannels(), w.getsampwidth()) == (1, 2)
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float64) / 32767.0, w.getframerate()


def test_noise_added_within_amplitude(tmp_path):
    rows = [{"id": 0, "audios": [SINE, OGG]}, {"id": 1, "audios": [SINE]}, {"id": 2, "text": "no audio"}]
    out, rej = run(rows, p=1.0, min_amplitude=0.01, max_amplitude=0.02, save_dir=str(tmp_path))
    assert not rej
    a, b = out[0]["audios"]
    assert a.endswith(".wav") and b.endswith(".wav") and a.startswith(str(tmp_path))
    assert out[1]["audios"] == [a]  # the same audio: the same noise, the same file
    assert out[0]["__meta__"]["source_file"] == [SINE, OGG] and out[2].get("audios") is None
    for src, new in ((SINE, a), (OGG, b)):
        orig, sr = audio.load(src)
        got, sr2 = read_wav(new)
        assert sr2 == sr and len(got) == len(orig)
        residual = got - orig
        assert 0.009 < residual.std() < 0.021  # the amplitude is the noise's standard deviation
        assert abs(residual.mean()) < 0.003 and abs(np.corrcoef(residual[:-1], residual[1:])[0, 1]) < 0.05


def test_seeded_and_p(tmp_path):
    rows = [{"audios": [SINE]}, {"audios": [NOISE]}]
    one, _ = run(rows, p=1.0, save_dir=str(tmp_path / "a"))
    two, _ = run(rows[::-1], p=1.0, save_dir=str(tmp_path / "b"))
    assert read_wav(one[0]["audios"][0])[0].tolist() == read_wav(two[1]["audios"][0])[0].tolist()
    other, _ = run(rows, p=1.0, seed=7, save_dir=str(tmp_path / "c"))
    assert read_wav(other[0]["audios"][0])[0].tolist() != read_wav(one[0]["audios"][0])[0].tolist()
    none, _ = run(rows, p=0.0, save_dir=str(tmp_path / "d"))
    assert [r["audios"] for r in none] == [[SINE], [NOISE]] and not (tmp_path / "d").exists()
    # p=0.5 over many distinct seeds: about half the draws apply noise
    op = create_op("audio_add_gaussian_noise_mapper", {})
    from gristmill.ops.audio.gaussian_noise import noisy
    hits = sum(noisy(np.zeros(4, np.float32), op._rng(f"/x/{i}.wav"), 0.001, 0.015, 0.5) is not None
               for i in range(400))
    assert 150 < hits < 250


def test_bad_params():
    with pytest.raises(ValueError, match="min_amplitude must be < max_amplitude"):
        create_op("audio_add_gaussian_noise_mapper", {"min_amplitude": 0.1, "max_amplitude": 0.1})
    with pytest.raises(ValueError, match="p"):
        create_op("audio_add_gaussian_noise_mapper", {"p": 1.5})
