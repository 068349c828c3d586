"""Tiny, randomly initialised text models written with ``save_pretrained`` (what users point ``hf_*`` params at):
a BERT sequence classifier, a GPT-2 causal LM with a word-level tokenizer and a chat template, a BERT
encoder for embeddings. Nothing is downloaded."""
from __future__ import annotations

from pathlib import Path

WORDS = ("the a an cat dog sat on mat ran fast slow red blue green is was and of to in it this that what how "
         "why where who sentence here please rewrite write make more formal longer shorter question answer "
         "i you we like love hate good bad weather today book buy sell price stock market game team").split()
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} </s> {% endfor %}"
                 "{% if add_generation_prompt %}assistant : {% endif %}")


def _vocab() -> list[str]:
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "</s>", "system", "user", "assistant"] + WORDS + \
        list("abcdefghijklmnopqrstuvwxyz0123456789.,!?\"'") + ["你", "好", "天", "气"]


def build_bert_classifier(d: Path, labels: list[str], seed: int = 0) -> Path:
    """A tiny BertForSequenceClassification with ``labels`` and a word-piece tokenizer."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer
    d.mkdir(parents=True, exist_ok=True)
    (d / "vocab.txt").write_text("\n".join(_vocab()) + "\n")
    BertTokenizer(str(d / "vocab.txt")).save_pretrained(d)
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(_vocab()), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, max_position_embeddings=128, id2label=dict(enumerate(labels)),
                     label2id={n: i for i, n in enumerate(labels)})
    BertForSequenceClassification(cfg).save_pretrained(d)
    return d


def build_bert_encoder(d: Path, seed: int = 0) -> Path:
    """A tiny BertModel (AutoModel) and its tokenizer: an embedding model."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer
    d.mkdir(parents=True, exist_ok=True)
    (d / "vocab.txt").write_text("\n".join(_vocab()) + "\n")
    BertTokenizer(str(d / "vocab.txt")).save_pretrained(d)
    torch.manual_seed(seed)
    BertModel(BertConfig(vocab_size=len(_vocab()), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=128), add_pooling_layer=False).save_pretrained(d)
    return d


def word_tokenizer(bos: bool = False):
    """A word-level fast tokenizer over the tiny vocabulary (words and punctuation split by whitespace rules)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {w: i for i, w in enumerate(_vocab())}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Punctuation()])
    tok.decoder = decoders.WordPiece(prefix="##")  # joins tokens with spaces
    kw = {"bos_token": "[CLS]"} if bos else {}
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", eos_token="</s>",
                                   **kw)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_causal_lm(d: Path, seed: int = 0, bos: bool = False) -> Path:
    """A tiny GPT2LMHeadModel with the word-level tokenizer (and a chat template)."""
    import torch
    from transformers import GenerationConfig, GPT2Config, GPT2LMHeadModel
    d.mkdir(parents=True, exist_ok=True)
    tok = word_tokenizer(bos)
    tok.save_pretrained(d)
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=len(_vocab()), n_embd=32, n_layer=2, n_head=2, n_positions=256, initializer_range=0.5,
                     bos_token_id=tok.bos_token_id if bos else tok.eos_token_id, eos_token_id=tok.eos_token_id,
                     pad_token_id=tok.pad_token_id)
    model = GPT2LMHeadModel(cfg)
    # no [PAD]/[UNK]/[CLS]/[SEP]/[MASK] in generated text: a random model would repeat one of them
    model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                                               suppress_tokens=[0, 1, 2, 3, 4])
    model.save_pretrained(d)
    return d
