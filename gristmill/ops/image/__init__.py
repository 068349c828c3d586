"""Image ops (Data-Juicer's names, params and semantics): rule-based filters, mappers and deduplicators
here; model-based ones in ``model_*.py``."""
