"""The ASGI guard in front of the REST API and MCP's HTTP app: security headers, the token, the Host and
cross-site checks, JSON-only bodies read up to their limit before the app sees them."""
from __future__ import annotations

import hmac

from .http import CSP, OPEN_PATHS, OPEN_PREFIXES, UNSAFE_METHODS, error_response

def _host_name(host: str) -> str:
    """A Host header's (or an origin's host:port) name, lower case, without the port and brackets."""
    host = host.strip().lower()
    return host[1:host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0]


def cross_site(method: str, headers: dict) -> str | None:
    """Why a state-changing request comes from another site (a page elsewhere posting a form or a fetch), or
    None: ``Sec-Fetch-Site: cross-site``, or an Origin that is not the Host it was sent to (``null``, from a
    sandboxed frame or a file, included). Requests without these headers (curl, scripts) pass."""
    if method not in UNSAFE_METHODS:
        return None
    if headers.get("sec-fetch-site", "").strip().lower() == "cross-site":
        return "cross-site request refused (Sec-Fetch-Site: cross-site)"
    origin = headers.get("origin")
    if origin is None:
        return None
    from urllib.parse import urlsplit
    try:
        parts = urlsplit(origin.strip())
        netloc = parts.netloc.lower() if parts.scheme in ("http", "https") else ""
    except ValueError:
        netloc = ""
    host = headers.get("host", "").strip().lower()
    if not netloc or netloc != host:
        return f"cross-site request refused: Origin {origin[:200]!r} is not this server ({host[:200]!r})"
    return None


class Guard:
    """ASGI middleware: the Content-Security-Policy (and nosniff) header on every answer; with a token, a
    Bearer token on everything but the UI's assets (compared in constant time); without one, the Host header
    among ``allowed_hosts`` and state-changing requests from this site only (:func:`cross_site`); JSON
    bodies only, at most ``max_body`` bytes (``limits``: other caps for some paths), read before the app
    sees them. Also wraps the MCP server's streamable HTTP app (``open_paths=()``, ``open_prefixes=()``)."""

    def __init__(self, app, token: str | None, max_body: int, allowed_hosts=None, limits: dict | None = None,
                 open_paths=OPEN_PATHS, open_prefixes=OPEN_PREFIXES):
        self.app = app
        self.token = token.encode() if token else None
        self.max_body = max_body
        self.hosts = {h.lower().strip("[]") for h in allowed_hosts} if allowed_hosts else None
        self.limits = dict(limits or {})
        self.open_paths, self.open_prefixes = tuple(open_paths), tuple(open_prefixes)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                if b"content-security-policy" not in names:
                    headers.append((b"content-security-policy", CSP.encode()))
                headers.append((b"x-content-type-options", b"nosniff"))
                headers.append((b"referrer-policy", b"no-referrer"))
                message = {**message, "headers": headers}
            await send(message)

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.hosts is not None:  # a page on another site reaching a loopback server by DNS rebinding
            host = _host_name(headers.get("host", ""))
            if host not in self.hosts:
                return await error_response(403, f"Host {host!r} not allowed: use http://127.0.0.1 or http://localhost")(
                    scope, receive, send_with_headers)
        method = scope.get("method", "")
        if self.token is None:  # with a token, the Bearer check below stops what another site sends
            why = cross_site(method, headers)
            if why:
                return await error_response(403, why)(scope, receive, send_with_headers)
        if self.token is not None and not (path in self.open_paths or path.startswith(self.open_prefixes)):
            auth = headers.get("authorization", "")
            scheme, _, given = auth.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode("utf-8", "replace"),
                                                                     self.token):
                resp = error_response(401, "missing or wrong token: send 'Authorization: Bearer TOKEN'",
                              headers={"WWW-Authenticate": "Bearer"})
                return await resp(scope, receive, send_with_headers)
        if method in ("POST", "PUT", "PATCH"):
            limit = self.limits.get(path.rstrip("/") or "/", self.max_body)
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype and ctype != "application/json":  # a form or text/plain: what another site can send
                return await error_response(415, "send the body as JSON (Content-Type: application/json)")(
                    scope, receive, send_with_headers)
            length = headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > limit):
                too_big = error_response(413, f"request body over {limit:,} bytes")
                return await too_big(scope, receive, send_with_headers)
            body, more = bytearray(), True
            while more:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    return
                body += msg.get("body", b"")
                more = msg.get("more_body", False)
                if len(body) > limit:
                    return await error_response(413, f"request body over {limit:,} bytes")(
                        scope, receive, send_with_headers)
            if body and ctype != "application/json":
                return await error_response(415, "send the body as JSON (Content-Type: application/json)")(
                    scope, receive, send_with_headers)
            sent = False

            async def replay():
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": bytes(body), "more_body": False}
                return await receive()

            return await self.app(scope, replay, send_with_headers)
        return await self.app(scope, receive, send_with_headers)
