"""alphanumeric_filter with `tokenization: true` and no hf_tokenizer (Data-Juicer's code recipes): the
tokenizer is Data-Juicer's default name, EleutherAI/pythia-6.9b-deduped, found in the model store as a
Hugging Face directory; missing, the op is refused at load with the command that adds it."""
import pytest

from gristmill import models
from gristmill.registry import OpError, create_op


def _tokenizer_dir(d):
    from tokenizers import Tokenizer, models as tm, pre_tokenizers
    tok = Tokenizer(tm.WordLevel({"def": 0, "f": 1, "(": 2, ")": 3, ":": 4, "[UNK]": 5}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(" ", "removed")
    d.mkdir()
    tok.save(str(d / "tokenizer.json"))
    (d / "config.json").write_text("{}")
    return d


def test_default_tokenizer_comes_from_the_store(tmp_path, monkeypatch):
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path / "store"))
    with pytest.raises(OpError, match="gristmill models add EleutherAI/pythia-6.9b-deduped DIR"):
        create_op("alphanumeric_filter", {"tokenization": True})
    models.add("EleutherAI/pythia-6.9b-deduped", str(_tokenizer_dir(tmp_path / "pythia")))
    op = create_op("alphanumeric_filter", {"tokenization": True, "min_ratio": 1.5})
    assert op.models() == ["EleutherAI/pythia-6.9b-deduped"]
    kept, removed = op.apply([{"text": "def f ( ) :"}, {"text": "( ) :"}], removed=True)
    # letters per token: 4 letters / 5 tokens; 0 / 3
    assert [r["__stats__"]["alpha_token_ratio"] for r in kept + removed] == [0.8, 0.0]
    assert kept == []
