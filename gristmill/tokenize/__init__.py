"""Tokenizers, chat templates, packing, trainer formats, loader and mixing: cleaned text → training data.

Entry point: :func:`gristmill.tokenize.run.run_tokenize` with a ``tokenize:`` recipe section
(:class:`gristmill.tokenize.config.TokenizeConfig`). See docs/tokenize.md.
"""
