"""The one OpenAI-compatible client every LLM op goes through: concurrent requests, rate limits, retries
with backoff, a request cache in the run's work dir, per-op counters (docs/llm.md)."""
from .client import (ClientConfig, Counters, EndpointError, LLMClient, Outcome, RequestFailed,
                     client_for, nested_get)

__all__ = ["ClientConfig", "Counters", "EndpointError", "LLMClient", "Outcome", "RequestFailed", "client_for",
           "nested_get"]
