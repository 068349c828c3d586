"""A small two-class corpus for the fastText tests, built on any machine without downloads.

- ``hq``: real English prose, the docstrings of Python standard-library modules and their functions (each
  paragraph of at least 120 characters);
- ``cc``: web boilerplate and spam lines (shop, cookie, login and casino text) drawn by a seeded RNG.
"""
from __future__ import annotations

import importlib
import inspect
import random

MODULES = ["json", "re", "os", "collections", "itertools", "functools", "string", "textwrap", "argparse",
           "logging", "pathlib", "datetime", "decimal", "fractions", "statistics", "random", "heapq", "bisect",
           "csv", "sqlite3", "email", "urllib.parse", "unittest", "dataclasses", "enum", "threading",
           "subprocess", "shutil", "zipfile", "tarfile", "gzip", "pickle", "copy", "pprint", "inspect", "ast",
           "tokenize", "difflib", "html.parser", "xml.etree.ElementTree", "http.client", "socket", "select",
           "base64", "hashlib", "hmac", "secrets", "uuid", "math", "cmath", "operator", "contextlib", "abc"]

SPAM = [
    "Buy {n} cheap {item} now and get free shipping on every order over ${p}!",
    "Click here to claim your ${p} casino bonus, limited offer, {n} spins free today.",
    "We use cookies to improve your experience. Accept all cookies or manage your preferences.",
    "Login | Register | My Account | Cart ({n}) | Checkout | Wishlist | Help",
    "Copyright {y} {brand}. All rights reserved. Privacy Policy | Terms of Use | Sitemap",
    "Hot deal: {item} only ${p}.99, {n}% off, best price guaranteed, order now!!!",
    "Subscribe to our newsletter and win a {item}, enter your email below, {n} winners every week.",
    "Best {item} online, cheap {item} for sale, buy {item} {y}, {item} discount code.",
    "Home > {brand} > {item} > Page {n} of {p}   Share on Facebook Tweet Pin it",
    "Sexy singles in your area are waiting, click now, {n} new messages, free registration.",
]
ITEMS = ["phone", "watch", "viagra", "sneakers", "laptop", "handbag", "loans", "pills", "jeans", "tickets"]
BRANDS = ["ShopMax", "BestDeals", "MegaStore", "LuckyWin", "DealHub"]


def hq_texts(limit: int = 400) -> list[str]:
    out: list[str] = []
    for name in MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:  # pragma: no cover - every CPython has them
            continue
        docs = [inspect.getdoc(mod) or ""]
        docs += [inspect.getdoc(obj) or "" for _, obj in sorted(vars(mod).items())
                 if (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", "") == name]
        for doc in docs:
            for para in doc.split("\n\n"):
                para = " ".join(para.split())
                if len(para) >= 120 and not para.startswith((">>>", "-", "*", "Usage")):
                    out.append(para)
    out = list(dict.fromkeys(out))
    return out[:limit]


def cc_texts(n: int = 400, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        lines = [rng.choice(SPAM).format(n=rng.randint(2, 99), p=rng.randint(5, 999), y=rng.randint(2005, 2024),
                                         item=rng.choice(ITEMS), brand=rng.choice(BRANDS))
                 for _ in range(rng.randint(2, 5))]
        out.append("\n".join(lines))
    return out


def write_fasttext_file(path, hq: list[str], cc: list[str]) -> None:
    """fastText's training format: ``__label__hq text`` lines, newlines in a text as spaces."""
    with open(path, "w", encoding="utf-8") as f:
        for lab, texts in (("hq", hq), ("cc", cc)):
            for t in texts:
                f.write(f"__label__{lab} " + " ".join(t.split()) + "\n")


def train_model(tmp_path, name: str = "model.bin"):
    """A model trained by the fasttext library itself (one thread: deterministic) on a few KB per class."""
    import fasttext
    hq, cc = hq_texts(150), cc_texts(150)
    data = tmp_path / "train.txt"
    write_fasttext_file(data, hq, cc)
    model = fasttext.train_supervised(str(data), thread=1, seed=1, epoch=10, lr=0.5, wordNgrams=2, dim=16,
                                      verbose=0)
    path = tmp_path / name
    model.save_model(str(path))
    return path
