"""Web ops: HTML main-text extraction and arXiv LaTeX cleaning."""
