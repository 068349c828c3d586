"""Helpers: a small byte-level BPE tokenizer trained here (Qwen's pre-tokeniser, NFC, ChatML specials) and
small multilingual JSONL inputs written into tmp dirs."""
from __future__ import annotations

import json
import os

from gristmill.tokenize.backends import QWEN_PATTERN

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

TEXTS = [
    "The quick brown fox jumps over the lazy dog. It's 2024, and we're testing tokenizers!",
    "Packing documents into rows of seq_len + 1 tokens keeps every token in training.",
    "数据清洗之后，我们把文本切分成词元，然后打包成固定长度的训练样本。",
    "Café naïve résumé — déjà vu; ÆØÅ æøå; Ελληνικά κείμενα; русский текст.",
    "def add(a, b):\n    return a + b\n\nprint(add(1, 2))  # 3\n",
    "Numbers 1234567 and 3.14159; emails like a.b@example.org; URLs https://example.org/x?y=1.",
    "机器学习模型需要大量高质量的中文和英文语料。\n\n第二段：更多的内容。",
    "Tabs\tand   multiple   spaces\r\nand CRLF line ends\n\n\n",
]


def train_tokenizer(vocab_size: int = 600):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(TEXTS * 20, trainer=trainer)
    return tok


def write_jsonl(path, docs):
    with open(path, "w", encoding="utf-8") as f:
        for i, t in enumerate(docs):
            f.write(json.dumps({"id": f"{os.path.basename(path)}:{i}", "text": t}, ensure_ascii=False) + "\n")


def make_docs(n: int, seed: int) -> list[str]:
    """Deterministic documents of varied length built from TEXTS."""
    import random
    r = random.Random(seed)
    return [" ".join(r.choice(TEXTS) for _ in range(r.randint(1, 12))) for _ in range(n)]


def first_input_ids(loader, n: int) -> list:
    """The ``input_ids`` of a loader's first ``n`` batches, leaving it mid-epoch (to take its state)."""
    got = []
    for b in loader:
        got.append(b["input_ids"])
        if len(got) == n:
            break
    return got
