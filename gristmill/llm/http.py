"""A small asyncio HTTP/1.1 client for JSON POSTs with keep-alive connections: what the LLM client sends.

httpx costs 2-4 ms of CPU per request, which caps one worker at a few hundred requests per second; this
costs a fraction of that, so a worker is limited by ``max_concurrent / latency``, not by its own CPU.
Plain http and https (TLS with the system's CA store); bodies by Content-Length, chunked or until close.
Proxies are not spoken: when ``HTTPS_PROXY``/``HTTP_PROXY`` apply to the URL the client uses httpx instead."""
from __future__ import annotations

import asyncio
import ssl as _ssl
import urllib.request
from urllib.parse import urlsplit


class ConnectFailed(OSError):
    """The TCP (or TLS) connection could not be opened: the endpoint is down or the URL is wrong."""


class TransportFailed(OSError):
    """The connection broke while sending or receiving."""


class Response:
    __slots__ = ("status_code", "reason_phrase", "headers", "content")

    def __init__(self, status: int, reason: str, headers: dict[str, str], content: bytes):
        self.status_code, self.reason_phrase, self.headers, self.content = status, reason, headers, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self):
        import orjson
        return orjson.loads(self.content)


def needs_proxy(url: str) -> bool:
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    if parts.scheme not in proxies:
        return False
    return not urllib.request.proxy_bypass(parts.hostname or "")


class Pool:
    """Keep-alive connections to one origin (at most ``size`` open; idle ones are reused)."""

    def __init__(self, url: str, size: int, headers: dict[str, str]):
        parts = urlsplit(url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host_header = self.host if parts.port is None else f"{self.host}:{parts.port}"
        self.head = "".join(f"{k}: {v}\r\n" for k, v in {"Host": host_header, "Accept-Encoding": "identity",
                                                          "Connection": "keep-alive", **headers}.items())
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.ctx = _ssl.create_default_context() if self.https else None

    async def _open(self):
        try:
            return await asyncio.open_connection(self.host, self.port, ssl=self.ctx,
                                                 server_hostname=self.host if self.https else None, limit=2 ** 24)
        except (OSError, _ssl.SSLError) as e:
            raise ConnectFailed(f"{e.strerror or e}" if isinstance(e, OSError) and e.strerror else str(e)) from None

    async def post(self, body: bytes) -> Response:
        """POST ``body`` (JSON) to the pool's URL. A reused connection the server had closed is retried once
        on a fresh one."""
        req = (f"POST {self.path} HTTP/1.1\r\n{self.head}Content-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1") + body
        while self.idle:
            conn = self.idle.pop()
            try:
                return await self._exchange(conn, req)
            except (TransportFailed, ConnectionError, asyncio.IncompleteReadError):
                continue  # stale keep-alive connection
        conn = await self._open()
        try:
            return await self._exchange(conn, req)
        except (ConnectionError, asyncio.IncompleteReadError, _ssl.SSLError) as e:
            raise TransportFailed(f"connection broken: {type(e).__name__}: {e}") from None

    async def _exchange(self, conn, req: bytes) -> Response:
        reader, writer = conn
        ok = False
        try:
            writer.write(req)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/"):
                raise TransportFailed(f"not an HTTP response: {lines[0][:100]!r}")
            status, reason = int(parts[1]), (parts[2] if len(parts) > 2 else "")
            headers: dict[str, str] = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            if headers.get("transfer-encoding", "").lower() == "chunked":
                chunks = []
                while True:
                    size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
                    if size == 0:
                        while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                            pass
                        break
                    chunks.append(await reader.readexactly(size))
                    await reader.readexactly(2)
                content = b"".join(chunks)
                reusable = True
            elif "content-length" in headers:
                content = await reader.readexactly(int(headers["content-length"]))
                reusable = True
            else:
                content = await reader.read()
                reusable = False
            if headers.get("connection", "").lower() == "close" or parts[0] == "HTTP/1.0":
                reusable = False
            ok = True
            if reusable:
                self.idle.append(conn)
            else:
                writer.close()
            return Response(status, reason, headers, content)
        finally:
            if not ok:
                writer.close()

    def close(self) -> None:
        for _, w in self.idle:
            w.close()
        self.idle.clear()
