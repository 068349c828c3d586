"""Where the engine, tokenizer and inspector read shards from: the readers themselves are one per module
(``jsonl``, ``json_array``, ``parquet``, ``csv_tsv``, ``txt``, ``arrow``, ...); importing this registers them."""
from __future__ import annotations

from .base import read_shard, read_texts, readers

readers()

__all__ = ["read_shard", "read_texts"]
