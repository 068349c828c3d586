"""Tokenizers, chat templates, packing, trainer formats, loader and mixing: cleaned text → training data.

Entry point: :func:`gristmill.tokenize.run.run_tokenize` with a ``tokenize:`` recipe section
(:class:`gristmill.tokenize.config.TokenizeConfig`). See docs/tokenize.md.
"""

# what a tokenize worker imports before its first shard (reading and tokenizing): all its fork server preloads
# (engine/preload.py imports exactly what a pool names; no shard task); here so that
# `gristmill tokenize` starts that server before it imports anything else
WORKER_MODULES = ["gristmill.io.formats", "gristmill.tokenize.shards", "tiktoken"]
