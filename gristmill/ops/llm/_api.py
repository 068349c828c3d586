"""What every API-model op shares: Data-Juicer's model params (``api_or_hf_model``, ``api_endpoint``,
``response_path``, ``model_params``, ``sampling_params``, ``try_num``), gristmill's client settings
(concurrency, rate limits, retries, timeout, dry run), the endpoint's trust check, and asking a batch's
requests at once through ``gristmill.llm``.

A request body is Data-Juicer's: ``{"messages": [...], "model": api_or_hf_model, **sampling_params}``
posted to ``base_url + api_endpoint`` (default ``/chat/completions``; the base URL from
``model_params.base_url``, else ``$OPENAI_BASE_URL``, else OpenAI's). An answer that cannot be parsed is
asked again (up to ``try_num`` times, each a new cache entry); a request that still fails after the
client's retries rejects its row with the error."""
from __future__ import annotations

import os
import sys
from typing import Any, Callable, ClassVar

import pyarrow as pa
from pydantic import Field, PositiveInt

from ...core import trust
from ...core.fused import StopRun
from ...core.run_context import work_dir
from ..base import Mapper, Params, RowMapper

DRY_RUN_ENV = "GRISTMILL_LLM_DRY_RUN"
CACHE_ENV = "GRISTMILL_LLM_CACHE"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
# params that change how requests are sent, never what is asked: out of config() (the resume fingerprint)
SENDING = ("max_concurrent", "requests_per_minute", "tokens_per_minute", "request_timeout", "max_retries",
           "retry_base_delay", "api_key_env", "dry_run", "cache_dir")


class APIClientParams(Params):
    """Data-Juicer's API params (less the model's name), then gristmill's client settings."""

    api_endpoint: str | None = Field(None, description="URL path appended to the base URL (default "
                                     "/chat/completions), or a full http(s) URL.")
    response_path: str | None = Field(None, description="Dotted path of the answer in the response JSON "
                                      "(default choices.0.message.content).")
    model_params: dict | None = Field(default_factory=dict, description="Client settings, as Data-Juicer passes them "
                               "to openai.OpenAI: base_url, api_key, timeout, max_retries, default_headers.")
    sampling_params: dict | None = Field(default_factory=dict, description="Extra request fields, e.g. "
                                  "{temperature: 0.9, top_p: 0.95}.")
    try_num: PositiveInt = Field(3, description="Times an answer is asked for while it cannot be parsed.")
    max_concurrent: int = Field(16, ge=1, description="Requests in flight at once per worker process "
                                "(gristmill).")
    requests_per_minute: float | None = Field(None, gt=0, description="Requests/min limit of the whole run, "
                                              "shared by its worker processes (gristmill).")
    tokens_per_minute: float | None = Field(None, gt=0, description="Tokens/min limit of the whole run "
                                            "(gristmill; estimated before sending, corrected with usage).")
    request_timeout: float = Field(120.0, gt=0, description="Seconds one request may take (gristmill; "
                                   "model_params.timeout wins).")
    max_retries: int = Field(6, ge=0, description="Retries of a request on 429, 5xx, timeouts and dropped "
                             "connections, with exponential backoff and jitter, honouring Retry-After "
                             "(gristmill; model_params.max_retries wins).")
    retry_base_delay: float = Field(1.0, ge=0, description="First backoff in seconds, doubled each retry "
                                    "(gristmill).")
    api_key_env: str = Field(DEFAULT_KEY_ENV, description="Environment variable holding the API key "
                             "(gristmill).")
    dry_run: int = Field(0, ge=0, description="Print the first N requests to stderr and stop before sending "
                         "any (gristmill; also $GRISTMILL_LLM_DRY_RUN).")
    cache_dir: str | None = trust.path_param("write", None, description="Request cache directory (gristmill; "
                                             "default: WORK/llm_cache of the run, memory under op.apply).")


class APIParams(APIClientParams):
    """Ops whose model param is Data-Juicer's ``api_or_hf_model`` (with ``is_hf_model`` / ``enable_vllm``)."""

    api_or_hf_model: str = Field("gpt-4o", description="Model name sent in each request.")
    is_hf_model: bool = Field(False, description="Load the model in the worker with transformers (a local "
                              "directory or a model-store name; the models extra) instead of asking an endpoint.")
    enable_vllm: bool = Field(False, description="Data-Juicer's in-process vLLM: not supported; use vLLM's "
                              "OpenAI server and api_endpoint.")


class APIModelParams(APIClientParams):
    """Ops whose model param is Data-Juicer's ``api_model`` (API only)."""

    api_model: str = Field("gpt-4o", description="Model name sent in each request.")


class APIOp:
    """Mixin of the API-model ops: ``self.ask(bodies)`` and the client's counts for the report."""

    def missing_libraries(self) -> list[str]:
        """An endpoint needs nothing beyond the core; ``is_hf_model`` runs the model here (transformers, torch)."""
        from ...core import extras
        local = ("transformers", "torch") if getattr(self.params, "is_hf_model", False) else ()
        return extras.missing((*self.requires, *local))

    def _init_api(self) -> None:
        p = self.params
        if getattr(p, "enable_vllm", False):
            raise ValueError(f"{self.name}: enable_vllm (vLLM inside the worker) is not supported; serve "
                             f"{self.model_name()!r} with vLLM's OpenAI server (`vllm serve`) and set "
                             f"api_endpoint or $OPENAI_BASE_URL")
        self._local = bool(getattr(p, "is_hf_model", False))
        if self._local:
            name = self.model_name()
            if os.path.isdir(name) or not trust.is_model_name(name):
                trust.check_read(name, f"{self.name}.api_or_hf_model")
        self._url, chosen = self.endpoint_url()
        pol = trust.current()
        self._send_env_key = True
        if chosen and (pol.restricted or not pol.allow_private_urls):
            trust.check_url(self._url, f"{self.name}.api_endpoint", pol)
        if pol.restricted:
            if p.api_key_env != DEFAULT_KEY_ENV:
                raise trust.Refused(f"{self.name}.api_key_env: only {DEFAULT_KEY_ENV} is read on this server")
            # a URL the recipe chose gets no key of the server's: only one the recipe gives itself
            self._send_env_key = not chosen
        from ...llm.client import Counters
        self._counters = Counters()

    def endpoint_url(self) -> tuple[str, bool]:
        """(the URL requests go to, whether the recipe chose it rather than the server's environment)."""
        p = self.params
        ep = p.api_endpoint or "/chat/completions"
        if ep.lower().startswith(("http://", "https://")):
            return ep, True
        base = (p.model_params or {}).get("base_url")
        chosen = bool(base)
        if not base:
            from ...llm.client import DEFAULT_BASE_URL
            base = os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        return str(base).rstrip("/") + "/" + ep.lstrip("/"), chosen

    def config(self) -> dict:
        cfg = super().config()
        cfg["params"] = {k: v for k, v in cfg["params"].items() if k not in SENDING}
        (cfg["params"].get("model_params") or {}).pop("api_key", None)
        return cfg

    # -- asking -----------------------------------------------------------------------------------------
    def client_config(self):
        from ...llm.client import ClientConfig
        p, mp = self.params, self.params.model_params or {}
        cache = p.cache_dir or os.environ.get(CACHE_ENV)
        if not cache and work_dir():
            cache = os.path.join(work_dir(), "llm_cache")
        headers = tuple(sorted((str(k), str(v)) for k, v in (mp.get("default_headers") or {}).items()))
        return ClientConfig(
            url=self._url, api_key_env=p.api_key_env if self._send_env_key else None,
            api_key=mp.get("api_key"), max_concurrent=p.max_concurrent,
            requests_per_minute=p.requests_per_minute, tokens_per_minute=p.tokens_per_minute,
            timeout=float(mp.get("timeout") or p.request_timeout),
            max_retries=int(mp["max_retries"]) if mp.get("max_retries") is not None else p.max_retries,
            retry_base_delay=p.retry_base_delay, cache_dir=cache, headers=headers)

    def model_name(self) -> str:
        p = self.params
        return p.api_model if hasattr(p, "api_model") else p.api_or_hf_model

    def chat_body(self, messages: list[dict]) -> dict:
        body: dict[str, Any] = {"messages": messages, "model": self.model_name()}
        body.update(self.params.sampling_params or {})
        return body

    def answer_text(self, response: dict | None) -> str:
        from ...llm.client import nested_get
        v = nested_get(response, self.params.response_path or "choices.0.message.content")
        return v if isinstance(v, str) else ("" if v is None else str(v))

    def ask(self, bodies: list[dict], accept=None, tries: int = 1):
        """One Outcome per body (``gristmill.llm.client.Outcome``), asked concurrently; a body whose answer
        ``accept`` refuses is asked again, up to ``tries`` attempts."""
        from ...llm.client import client_for, print_dry_run
        n_dry = self.params.dry_run or int(os.environ.get(DRY_RUN_ENV) or 0)
        if n_dry and bodies:
            print_dry_run(self.name, self._url, bodies, n_dry, sys.stderr)
            raise StopRun(f"{self.name}: dry run: printed the first {min(n_dry, len(bodies))} request(s) to "
                          f"stderr; nothing was sent to {self._url}")
        if self._local:
            return self._ask_local(bodies, accept, tries)
        return client_for(self.client_config()).post_many(bodies, self._counters, accept, tries)

    def models(self) -> list[str]:
        name = self.model_name()
        return [name] if getattr(self, "_local", False) and not os.path.isdir(name) else []

    def _ask_local(self, bodies: list[dict], accept, tries: int):
        """Data-Juicer's is_hf_model: each body generated in this process, one after another (answers kept
        in the same request cache)."""
        import time

        from ...llm.cache import open_cache, request_key
        from ...llm.client import Outcome
        from ._local import LocalChat
        p = self.params
        chat = self.resource("local_chat", lambda: LocalChat(self.model_name(), p.model_params or {},
                                                             p.sampling_params or {}))
        cache = open_cache(self.client_config().cache_dir)
        outs = []
        for body in bodies:
            last = None
            for attempt in range(tries):
                key = request_key(body, attempt)
                hit = cache.get(key)
                if hit is None:
                    t0 = time.perf_counter()
                    text = chat.chat(body["messages"])
                    self._counters.requests += 1
                    self._counters.request_seconds += time.perf_counter() - t0
                    hit = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
                    cache.put(key, hit)
                last = Outcome(hit)
                if accept is None or accept(hit):
                    break
            outs.append(last)
        return outs

    def ask_parsed(self, bodies: list[dict], parse: Callable[[str], Any], ok: Callable[[Any], bool]):
        """Data-Juicer's try loop: each body is asked (attempt 0, 1, … up to ``try_num``, each attempt as soon
        as the previous answer failed) until ``ok(parse(answer))``; returns (parsed values: the good one,
        else the last parse, else None; errors: the message of a request that failed for good, else None).
        An empty answer or a parse that raises counts as no parse."""
        def parsed(response):
            text = self.answer_text(response)
            if not text.strip():
                return None
            try:
                return parse(text)
            except Exception:  # noqa: BLE001 - Data-Juicer asks again on any parsing error
                return None

        def accept(response) -> bool:
            v = parsed(response)
            return v is not None and ok(v)

        outs = self.ask(bodies, accept, self.params.try_num)
        values = [None if o.error is not None else parsed(o.response) for o in outs]
        return values, [o.error for o in outs]

    def take_service_counts(self) -> dict:
        c = getattr(self, "_counters", None)
        return c.take() if c is not None else {}


def raise_failed(errors: list[str | None]) -> None:
    """Raise the first request failure of a batch: the engine then retries the batch row by row (answers
    come from the cache, failures from the client's memo), so only the failed rows are rejected."""
    from ...llm.client import RequestFailed
    bad = [e for e in errors if e is not None]
    if bad:
        raise RequestFailed(bad[0] if len(bad) == 1 else f"{bad[0]} (and {len(bad) - 1} more row(s) of the batch)")


def rows_of(batch: pa.RecordBatch) -> list[dict]:
    from ...core import columns as C
    return C.to_pylist(batch)


class LLMRowMapper(APIOp, RowMapper):
    """A mapper asking one chat per row, a batch's rows at once: ``messages(row)`` → the answer's text →
    ``parse(text)`` (None or an exception: asked again, up to ``try_num``) → ``apply_answer(row, value)``
    (value None when no answer parsed: Data-Juicer then leaves the row as it was)."""

    def messages(self, row: dict) -> list[dict]:  # pragma: no cover - abstract
        raise NotImplementedError

    def parse(self, text: str):  # pragma: no cover - abstract
        raise NotImplementedError

    def parsed_ok(self, value) -> bool:
        return value is not None

    def apply_answer(self, row: dict, value) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not batch.num_rows:
            return batch
        if self.declares_inputs():
            self.check_inputs(batch)
        rows = rows_of(batch)
        msgs = [self.messages(r) for r in rows]  # None: a row not to ask (apply_answer gets None)
        asked = [i for i, m in enumerate(msgs) if m is not None]
        parsed, errors = self.ask_parsed([self.chat_body(msgs[i]) for i in asked], self.parse, self.parsed_ok)
        raise_failed(errors)
        answers = dict(zip(asked, parsed))
        self._pending = iter([answers.get(i) for i in range(len(rows))])
        try:
            return super().process_batch(batch)
        finally:
            self._pending = None

    def map(self, row: dict) -> dict:
        return self.apply_answer(row, next(self._pending))


class LLMMetaMapper(APIOp, Mapper):
    """A mapper writing one meta field per row from one chat per row (Data-Juicer's ``extract_*`` mappers):
    rows whose meta field is already set are not asked again; ``drop_text`` removes the text field."""

    meta_param: ClassVar[str] = ""  # the param naming the meta field written

    def messages(self, row: dict) -> list[dict] | None:  # pragma: no cover - abstract
        """The row's messages, or None for a row not to ask (its value is then ``skipped(row)``)."""
        raise NotImplementedError

    def parse(self, text: str):  # pragma: no cover - abstract
        raise NotImplementedError

    def parsed_ok(self, value) -> bool:
        return bool(value)

    def value(self, row: dict, parsed):
        """The meta value of an asked row (``parsed``: None when no answer parsed)."""
        return parsed

    def skipped(self, row: dict):
        return None

    def meta_type(self) -> pa.DataType | None:
        return None

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        from ...core import columns as C
        if not batch.num_rows:
            return batch
        key = getattr(self.params, self.meta_param)
        have = C.get_meta(batch, key)
        done = [False] * batch.num_rows if have is None else [v is not None for v in have.to_pylist()]
        rows = rows_of(batch)
        msgs = [None if d else self.messages(r) for r, d in zip(rows, done)]
        asked = [i for i, m in enumerate(msgs) if m is not None]
        parsed, errors = self.ask_parsed([self.chat_body(msgs[i]) for i in asked], self.parse, self.parsed_ok)
        raise_failed(errors)
        answers = dict(zip(asked, parsed))
        values = [have[i].as_py() if done[i] else (self.value(rows[i], answers[i]) if i in answers
                                                   else self.skipped(rows[i])) for i in range(len(rows))]
        out = C.with_meta(batch, {key: pa.array(values, self.meta_type())})
        if getattr(self.params, "drop_text", False) and self.text_key in out.schema.names:
            out = out.drop_columns([self.text_key])
        return out
