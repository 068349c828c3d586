"""A small OpenAI-compatible HTTP server for the LLM ops' tests and benchmark (no mock of the client: the
client speaks HTTP to it). ``POST .../chat/completions`` answers ``answer(body, times_answered)`` (deterministic:
a function of the request; a ``(status, message)`` tuple answers that error), ``POST .../embeddings`` a vector per input derived from its text. It injects failures
(every ``fail_every``-th request answers 429 with ``Retry-After`` or 500, alternately), waits ``latency``
seconds per request, and counts: requests, per status, per distinct body, the most requests in flight."""
from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def body_key(body: dict) -> str:
    return hashlib.blake2b(json.dumps(body, sort_keys=True).encode(), digest_size=12).hexdigest()


def echo_answer(body: dict, times_asked: int) -> str:
    last = body["messages"][-1]["content"] if body.get("messages") else ""
    return f"echo: {last}"


class LLMServer:
    def __init__(self, answer=echo_answer, fail_every: int = 0, latency: float = 0.0, retry_after: str = "0",
                 fail_status: tuple[int, ...] = (429, 500), status: int | None = None):
        self.answer, self.fail_every, self.latency = answer, fail_every, latency
        self.retry_after, self.fail_status, self.status = retry_after, fail_status, status
        self.lock = threading.Lock()
        self.n = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.by_status: Counter = Counter()
        self.asked: Counter = Counter()  # body key → times answered 200
        self.bodies: list[dict] = []
        self.auth: Counter = Counter()  # Authorization headers seen
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

            def log_message(self, *a):  # quiet
                pass

            def _send(self, code: int, payload: dict, headers: dict | None = None):
                raw = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with server.lock:
                    server.auth[self.headers.get("Authorization")] += 1
                    server.n += 1
                    n = server.n
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if server.latency:
                        time.sleep(server.latency)
                    code, payload, headers = server.handle(self.path, raw, n)
                finally:
                    with server.lock:
                        server.in_flight -= 1
                        server.by_status[code] += 1
                self._send(code, payload, headers)

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # the default 5 drops concurrent connects (SYN retried after 1 s)
            daemon_threads = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def handle(self, path: str, raw: bytes, n: int):
        if self.status is not None:
            return self.status, {"error": {"message": f"status {self.status} (configured)"}}, {}
        if self.fail_every and n % self.fail_every == 0:
            code = self.fail_status[(n // self.fail_every) % len(self.fail_status)]
            return code, {"error": {"message": f"injected {code}"}}, ({"Retry-After": self.retry_after}
                                                                        if code == 429 else {})
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, {"error": {"message": "body is not JSON"}}, {}
        if path.endswith("/embeddings"):
            inputs = body.get("input")
            inputs = [inputs] if isinstance(inputs, str) else inputs
            data = [{"object": "embedding", "index": i,
                     "embedding": [b / 255 for b in hashlib.blake2b(str(t).encode(), digest_size=8).digest()]}
                    for i, t in enumerate(inputs)]
            return 200, {"object": "list", "data": data, "model": body.get("model"),
                         "usage": {"prompt_tokens": sum(len(str(t)) // 4 for t in inputs), "total_tokens": 0}}, {}
        if not path.endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {path}"}}, {}
        if "messages" not in body or "model" not in body:
            return 400, {"error": {"message": "messages and model are required"}}, {}
        key = body_key(body)
        with self.lock:
            times = self.asked[key]
            self.bodies.append(body)
        text = self.answer(body, times)
        if isinstance(text, tuple):  # (status, message): an error the answer function chose
            return text[0], {"error": {"message": text[1]}}, {}
        with self.lock:
            self.asked[key] += 1
        prompt = sum(len(str(m.get("content", ""))) for m in body["messages"]) // 4
        return 200, {"id": f"cmpl-{n}", "object": "chat.completion", "model": body["model"],
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": prompt, "completion_tokens": len(text) // 4,
                               "total_tokens": prompt + len(text) // 4}}, {}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def count(self, code: int = 200) -> int:
        return self.by_status[code]


def free_port_url() -> str:
    """A URL where nothing listens (an endpoint that is down)."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"
