"""Agent-trace ops (Data-Juicer's names, params and semantics): tool tags, tool success, bad-case
signals, and the LLM judges of a trace's coherence and tool fit."""
