"""Ops that ask an LLM through an OpenAI-compatible endpoint (Data-Juicer's API-model ops and synthetic data
mappers); every request goes through ``gristmill.llm``'s client (docs/llm.md)."""
