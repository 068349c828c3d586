"""The word notions of the text filters, each a compiled kernel over a whole column (implemented in the
private modules named below; import them from here).

- ``spacy_words`` (``_spacy_words``): datatrove's English word tokenizer, spaCy's rule-based one. The
  Gopher, FineWeb and C4 statistics depend on its token counts (punctuation tokens count as words).
- ``dj_words`` (``_dj_words``): Data-Juicer's split on space, tab and newline with its SPECIAL_CHARACTERS
  stripped from word edges; ``sp_word_spans``: the same words from a SentencePiece model's pieces
  (Data-Juicer's ``tokenization: true``).
- ``span_hash`` / ``py_hash`` / ``hash_map`` (``_spanhash``): hashes of code-point spans and lookup tables.
"""
from __future__ import annotations

from ._dj_words import (dj_words, lower_hash, lower_table, sp_word_spans,
                        word_set)
from ._spacy_words import (FIRST_SALT, special_table, spacy_words, spacy_words_py,
                           spacy_words_reusing, tokenize_span, units_table)
from ._spanhash import HMUL, M64, hash_map, hm_find, py_hash, span_hash

__all__ = ["dj_words", "lower_hash", "lower_table", "sp_word_spans", "word_set", "FIRST_SALT",
           "special_table", "spacy_words", "spacy_words_py", "spacy_words_reusing", "tokenize_span", "units_table",
           "HMUL", "M64", "hash_map", "hm_find", "py_hash", "span_hash"]
