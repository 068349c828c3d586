"""An OpenAI-compatible client for many requests at once (chat completions, embeddings).

``LLMClient.post_many(bodies)`` sends request bodies concurrently (at most ``max_concurrent`` in flight per
process), within the requests/min and tokens/min limits, retrying 429s, 5xx, timeouts and dropped
connections with exponential backoff and jitter (a ``Retry-After`` is honoured), answering from the request
cache what was asked before. Each body gets an ``Outcome``: the response JSON, or the error of a request
that still failed after the retries (the op rejects that row). An endpoint that cannot be reached at all,
or that refuses the key, the path or the model (401, 403, 404) raises ``EndpointError`` instead: every
row would fail the same way, so the run stops and names the endpoint."""
from __future__ import annotations

import asyncio
import email.utils
import os
import random
import sys
import threading
import time
from dataclasses import dataclass, field

from ..core.fused import StopRun
from .cache import open_cache, request_key
from .http import ConnectFailed, Pool, Response, TransportFailed, needs_proxy

DEFAULT_BASE_URL = "https://api.openai.com/v1"
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})
FATAL_STATUS = frozenset({401, 403, 404, 405})
MAX_RETRY_AFTER = 600.0  # seconds: a longer Retry-After is capped


class EndpointError(StopRun):
    """The endpoint cannot answer any request (down, wrong URL, key or model): the run stops, naming it."""


class RequestFailed(Exception):
    """One request that still failed after its retries (its row goes to the rejects with this message)."""


@dataclass(frozen=True)
class ClientConfig:
    """Where and how to send: everything but the key's value is plain data (pickled with the op)."""

    url: str
    """The full URL requests are posted to (base URL + endpoint path)."""
    api_key_env: str | None = "OPENAI_API_KEY"
    """The environment variable holding the key (read in the process that sends; None: none)."""
    api_key: str | None = field(default=None, repr=False)
    """A key given in the recipe (model_params.api_key); wins over the environment."""
    max_concurrent: int = 16
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    timeout: float = 120.0
    max_retries: int = 6
    retry_base_delay: float = 1.0
    retry_max_delay: float = 60.0
    connect_retries: int = 2
    """Attempts after a refused connection before the endpoint is declared down."""
    cache_dir: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def key(self) -> str | None:
        if self.api_key:
            return self.api_key
        return os.environ.get(self.api_key_env) if self.api_key_env else None


@dataclass
class Counters:
    """What one op's requests cost: reported per op in report.json (``llm``)."""

    requests: int = 0  # HTTP requests sent (retries included)
    retries: int = 0
    failures: int = 0  # requests given up after their retries (rows rejected)
    cached: int = 0  # answered from the request cache
    prompt_tokens: int = 0
    completion_tokens: int = 0
    request_seconds: float = 0.0  # summed time of the requests (they overlap)

    def take(self) -> dict:
        """The counts since the last take (and reset them)."""
        d = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in self.__dict__.items()}
        for k in self.__dict__:
            setattr(self, k, type(getattr(self, k))())
        return d if any(d.values()) else {}


@dataclass
class Outcome:
    response: dict | None = None
    error: str | None = None
    cached: bool = False


def nested_get(obj, path: str):
    """``choices.0.message.content`` of a response (None where the path does not lead)."""
    for part in path.split("."):
        if isinstance(obj, list):
            try:
                obj = obj[int(part)]
            except (ValueError, IndexError):
                return None
        elif isinstance(obj, dict):
            obj = obj.get(part)
        else:
            return None
    return obj


class _Limiter:
    """Requests/min and tokens/min as a GCRA: each request books 60/rpm seconds and its tokens 60/tpm seconds
    each; a request waits until both books allow it (bursts: max_concurrent requests, six seconds' worth of
    tokens). With ``path`` the books live in that file, under an exclusive lock, so that every worker
    process of the run (every process on a shared file system) shares one limit; else in this process."""

    def __init__(self, rpm: float | None, tpm: float | None, burst: int, path: str | None = None):
        self.rpm, self.tpm, self.burst, self.path = rpm, tpm, max(1, burst), path
        self.t_req = self.t_tok = 0.0
        self.lock = threading.Lock()

    def _update(self, fn):
        """``fn(t_req, t_tok) -> (t_req, t_tok, result)`` applied to the books, atomically."""
        with self.lock:
            if self.path is None:
                self.t_req, self.t_tok, out = fn(self.t_req, self.t_tok)
                return out
            import fcntl
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                raw = os.pread(fd, 64, 0).split()
                try:
                    t_req, t_tok = float(raw[0]), float(raw[1])
                except (IndexError, ValueError):
                    t_req = t_tok = 0.0
                t_req, t_tok, out = fn(t_req, t_tok)
                data = f"{t_req:.6f} {t_tok:.6f}".ljust(64).encode()
                os.pwrite(fd, data, 0)
                return out
            finally:
                os.close(fd)  # releases the lock

    def reserve(self, tokens: int) -> float:
        """Seconds to wait before sending (the slot is booked now)."""
        if not self.rpm and not (self.tpm and tokens):
            return 0.0
        now = time.time()  # wall clock: shared between processes

        def book(t_req, t_tok):
            wait = 0.0
            if self.rpm:
                step = 60.0 / self.rpm
                tat = max(t_req, now)
                wait = max(wait, tat - step * (self.burst - 1) - now)
                t_req = tat + step
            if self.tpm and tokens:
                tat = max(t_tok, now)
                wait = max(wait, tat - 6.0 - now)  # a tenth of a minute's tokens as burst
                t_tok = tat + tokens * 60.0 / self.tpm
            return t_req, t_tok, max(0.0, wait)
        return self._update(book)

    def correct(self, estimated: int, actual: int) -> None:
        if self.tpm and actual:
            self._update(lambda r, t: (r, t + (actual - estimated) * 60.0 / self.tpm, None))


_LIMITERS: dict[tuple, _Limiter] = {}


def _limiter(cfg: ClientConfig) -> _Limiter:
    """The limiter of ``cfg``'s endpoint: shared through a file in the cache directory (the run's work dir)
    by every worker process of the run, else this process's own."""
    key = (os.getpid(), cfg.url, cfg.requests_per_minute, cfg.tokens_per_minute, cfg.cache_dir)
    if key not in _LIMITERS:
        path = None
        if cfg.cache_dir and (cfg.requests_per_minute or cfg.tokens_per_minute):
            import hashlib
            digest = hashlib.blake2b(f"{cfg.url} {cfg.requests_per_minute} {cfg.tokens_per_minute}".encode(),
                                     digest_size=8).hexdigest()
            path = os.path.join(cfg.cache_dir, "limits", digest)
        _LIMITERS[key] = _Limiter(cfg.requests_per_minute, cfg.tokens_per_minute, cfg.max_concurrent, path)
    return _LIMITERS[key]


IMAGE_TOKENS = 765  # an image or video part's estimate (OpenAI's high-detail 512-pixel tiles), not its base64


def _content_chars(content) -> tuple[int, int]:
    """(text characters, media parts) of a message's content: a string, or OpenAI's list of parts."""
    if not isinstance(content, list):
        return len(str(content)), 0
    chars = media = 0
    for part in content:
        if isinstance(part, dict) and part.get("type") not in (None, "text"):
            media += 1
        else:
            chars += len(str(part.get("text", "")) if isinstance(part, dict) else str(part))
    return chars, media


def estimate_tokens(body: dict) -> int:
    """A request's tokens before asking: prompt characters / 4 (an image or video part IMAGE_TOKENS) plus
    the completion cap when given."""
    chars = media = 0
    for m in body.get("messages", []):
        if isinstance(m, dict):
            c, n = _content_chars(m.get("content", ""))
            chars, media = chars + c, media + n
    chars += len(str(body.get("input", ""))) if "input" in body else 0
    return chars // 4 + media * IMAGE_TOKENS + int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)


def retry_after(headers) -> float | None:
    """Seconds a ``Retry-After`` (or ``retry-after-ms``) header asks for, None without one."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return min(MAX_RETRY_AFTER, max(0.0, float(ms) / 1000))
        except ValueError:
            pass
    v = headers.get("retry-after")
    if not v:
        return None
    try:
        return min(MAX_RETRY_AFTER, max(0.0, float(v)))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(v)
        return min(MAX_RETRY_AFTER, max(0.0, when.timestamp() - time.time()))
    except (TypeError, ValueError):
        return None


class LLMClient:
    """One endpoint's client in one process (``client_for`` shares it between the ops that use it)."""

    def __init__(self, cfg: ClientConfig):
        self.cfg = cfg
        self.cache = open_cache(cfg.cache_dir)
        self.failed: dict[str, str] = {}  # key → error of a request given up in this process (not asked again)
        self.mine: set[str] = set()  # keys answered in this process (a hit on them is no cache saving)

    # -- public -----------------------------------------------------------------------------------------
    def post_many(self, bodies: list[dict], counters: Counters | None = None, accept=None,
                  tries: int = 1) -> list[Outcome]:
        """One ``Outcome`` per body, in order; raises ``EndpointError`` when the endpoint is unusable.

        ``accept(response) -> bool`` and ``tries``: a body whose answer is not accepted is asked again, up to
        ``tries`` times in all, each attempt its own cache entry (the attempt number is part of the key), as
        soon as its answer comes back (no batch-wide rounds); the outcome is the accepted answer, else the
        last one. Identical bodies of one call are asked once."""
        counters = counters if counters is not None else Counters()
        out: list[Outcome | None] = [None] * len(bodies)
        todo: dict[str, list[int]] = {}
        for i, b in enumerate(bodies):
            todo.setdefault(request_key(b, 0), []).append(i)
        items = [(bodies[idx[0]]) for idx in todo.values()]
        answers: list[Outcome | None] = [self._from_cache(b, counters, accept, tries) for b in items]
        missing = [j for j, a in enumerate(answers) if a is None]
        if missing:
            sent = _run(self._send_all([items[j] for j in missing], counters, accept, tries))
            for j, a in zip(missing, sent):
                answers[j] = a
        for idx, a in zip(todo.values(), answers):
            for i in idx:
                out[i] = a
        return out  # type: ignore[return-value]

    def embed_many(self, texts: list[str], model: str, batch_size: int = 64,
                   counters: Counters | None = None) -> list[list[float]]:
        """OpenAI embeddings (the client's URL is the ``/embeddings`` endpoint): one vector per text, in
        order, ``batch_size`` texts per request, the requests concurrent and cached like chat requests.
        Raises RequestFailed for a request that failed for good."""
        bodies = [{"model": model, "input": texts[i:i + batch_size]} for i in range(0, len(texts), batch_size)]
        out: list[list[float]] = []
        for body, o in zip(bodies, self.post_many(bodies, counters)):
            if o.error is not None:
                raise RequestFailed(o.error)
            data = sorted((o.response or {}).get("data") or [], key=lambda d: d.get("index", 0))
            if len(data) != len(body["input"]):
                raise RequestFailed(f"{self.cfg.url} returned {len(data)} embeddings for {len(body['input'])} "
                                    f"inputs")
            out.extend(d["embedding"] for d in data)
        return out

    def _from_cache(self, body: dict, counters: Counters, accept, tries: int) -> Outcome | None:
        """The body's outcome when the cache (or the failure memo) settles it without asking, else None."""
        last = None
        for attempt in range(tries):
            k = request_key(body, attempt)
            hit = self.cache.get(k)
            if hit is None:
                return Outcome(error=self.failed[k]) if k in self.failed else None
            counters.cached += k not in self.mine
            last = Outcome(hit, cached=True)
            if accept is None or accept(hit):
                return last
        return last

    # -- the async part -------------------------------------------------------------------------------
    async def _send_all(self, items: list[dict], counters: Counters, accept, tries: int) -> list[Outcome]:
        cfg = self.cfg
        sem = asyncio.Semaphore(cfg.max_concurrent)
        headers = dict(cfg.headers)
        key = cfg.key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        transport = _transport(cfg, headers)
        try:
            tasks = [asyncio.ensure_future(self._ask(transport, sem, b, counters, accept, tries)) for b in items]
            try:
                return list(await asyncio.gather(*tasks))
            except BaseException:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
        finally:
            await transport.aclose()

    async def _ask(self, transport, sem, body: dict, counters: Counters, accept, tries: int) -> Outcome:
        """One body's attempts: from the cache where it has them, else sent; stops at an accepted answer."""
        last = None
        for attempt in range(tries):
            k = request_key(body, attempt)
            hit = self.cache.get(k)
            if hit is not None:
                counters.cached += k not in self.mine
                last = Outcome(hit, cached=True)
            elif k in self.failed:
                return Outcome(error=self.failed[k])
            else:
                last = await self._send(transport, sem, k, body, counters)
                if last.error is not None:
                    return last
            if accept is None or accept(last.response):
                return last
        return last  # type: ignore[return-value]

    async def _send(self, transport, sem, key: str, body: dict, counters: Counters) -> Outcome:
        import orjson
        cfg = self.cfg
        limiter = _limiter(cfg)
        est = estimate_tokens(body)
        raw = orjson.dumps(body)
        connect_fails = 0
        last = ""
        for attempt in range(cfg.max_retries + 1):
            wait = limiter.reserve(est)
            if wait:
                await asyncio.sleep(wait)
            delay = None
            async with sem:
                counters.requests += 1
                if attempt:
                    counters.retries += 1
                t0 = time.perf_counter()
                try:
                    resp = await asyncio.wait_for(transport.post(raw), cfg.timeout)
                except ConnectFailed as e:
                    connect_fails += 1
                    last = f"cannot connect: {e}"
                    resp = None
                except asyncio.TimeoutError:
                    last = f"timed out after {cfg.timeout:g} s"
                    resp = None
                except TransportFailed as e:
                    last = str(e)
                    resp = None
                finally:
                    counters.request_seconds += time.perf_counter() - t0
            if resp is None:
                if connect_fails > cfg.connect_retries:
                    raise EndpointError(f"LLM endpoint {cfg.url} is unreachable ({last}); no request was "
                                        f"answered, so the run stops (is the server up? api_endpoint / "
                                        f"OPENAI_BASE_URL)")
            elif resp.status_code == 200:
                try:
                    data = resp.json()
                except ValueError:
                    last = f"HTTP 200 with a body that is not JSON: {resp.text[:200]!r}"
                else:
                    usage = data.get("usage") if isinstance(data, dict) else None
                    if isinstance(usage, dict):
                        pt, ct = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
                        counters.prompt_tokens += pt
                        counters.completion_tokens += ct
                        limiter.correct(est, pt + ct)
                    self.cache.put(key, data)
                    self.mine.add(key)
                    return Outcome(data)
            else:
                text = resp.text[:300].strip()
                if resp.status_code in FATAL_STATUS:
                    raise EndpointError(f"LLM endpoint {cfg.url} answered HTTP {resp.status_code} "
                                        f"({text or resp.reason_phrase}): check the URL, the model "
                                        f"({body.get('model')!r}) and the API key ({cfg.api_key_env or 'none'})")
                last = f"HTTP {resp.status_code}: {text or resp.reason_phrase}"
                if resp.status_code not in RETRY_STATUS:
                    break  # a request the server will not take (400, 413, 422): retrying cannot help
                delay = retry_after(resp.headers)
            if attempt == cfg.max_retries:
                break
            backoff = min(cfg.retry_max_delay, cfg.retry_base_delay * 2 ** attempt) * random.uniform(0.5, 1.0)
            await asyncio.sleep(max(backoff, delay) if delay is not None else backoff)
        counters.failures += 1
        msg = f"LLM request to {cfg.url} failed after {attempt + 1} attempt(s): {last}"
        self.failed[key] = msg
        return Outcome(error=msg)


class _HttpxTransport:
    """The same ``post`` through httpx, for URLs behind an HTTP(S)_PROXY (httpx speaks proxies)."""

    def __init__(self, cfg: ClientConfig, headers: dict[str, str]):
        try:
            import httpx
        except ImportError:
            raise EndpointError(f"LLM endpoint {cfg.url} is behind a proxy (HTTPS_PROXY/HTTP_PROXY), which needs "
                                f"httpx: pip install 'gristmill[llm]'") from None
        self.httpx, self.url = httpx, cfg.url
        limits = httpx.Limits(max_connections=cfg.max_concurrent, max_keepalive_connections=cfg.max_concurrent)
        self.http = httpx.AsyncClient(timeout=cfg.timeout, limits=limits,
                                      headers={**headers, "Content-Type": "application/json"})

    async def post(self, raw: bytes) -> Response:
        httpx = self.httpx
        try:
            r = await self.http.post(self.url, content=raw)
        except httpx.ConnectError as e:
            raise ConnectFailed(str(e) or type(e).__name__) from None
        except httpx.TimeoutException:
            raise asyncio.TimeoutError from None
        except httpx.TransportError as e:
            raise TransportFailed(f"{type(e).__name__}: {e}") from None
        return Response(r.status_code, r.reason_phrase, {k.lower(): v for k, v in r.headers.items()}, r.content)

    async def aclose(self) -> None:
        await self.http.aclose()


class _PoolTransport:
    def __init__(self, cfg: ClientConfig, headers: dict[str, str]):
        self.pool = Pool(cfg.url, cfg.max_concurrent, headers)

    async def post(self, raw: bytes) -> Response:
        return await self.pool.post(raw)

    async def aclose(self) -> None:
        self.pool.close()


def _transport(cfg: ClientConfig, headers: dict[str, str]):
    return _HttpxTransport(cfg, headers) if needs_proxy(cfg.url) else _PoolTransport(cfg, headers)


def _run(coro):
    """Run ``coro`` to completion from synchronous code (in a helper thread when this thread already runs
    an event loop, e.g. a notebook or an async server)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict = {}

    def target():
        try:
            box["v"] = asyncio.run(coro)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["e"] = e

    th = threading.Thread(target=target, name="gristmill-llm")
    th.start()
    th.join()
    if "e" in box:
        raise box["e"]
    return box["v"]


_CLIENTS: dict[tuple, LLMClient] = {}


def client_for(cfg: ClientConfig) -> LLMClient:
    """This process's client for ``cfg`` (one per configuration, so ops share the failure memo)."""
    key = (os.getpid(), cfg)
    if key not in _CLIENTS:
        _CLIENTS[key] = LLMClient(cfg)
    return _CLIENTS[key]


def print_dry_run(op_name: str, url: str, bodies: list[dict], n: int, file=None) -> None:
    """The first ``n`` request bodies, as they would be sent (no request is made)."""
    import json
    f = file or sys.stderr
    for i, body in enumerate(bodies[:n]):
        print(f"--- {op_name}: request {i + 1} of the first batch → POST {url}", file=f)
        print(json.dumps(_short_data_urls(body), ensure_ascii=False, indent=2), file=f)


def _short_data_urls(value):
    """``value`` with each base64 data URL (an image sent to a vision model) cut to its head and length."""
    if isinstance(value, dict):
        return {k: _short_data_urls(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_short_data_urls(v) for v in value]
    if isinstance(value, str) and value.startswith("data:") and ";base64," in value and len(value) > 120:
        return f"{value[:60]}… ({len(value)} characters)"
    return value
