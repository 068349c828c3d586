"""The LLM client's pieces: Retry-After parsing, the rate limiter's bookings, the request cache's files
(several writers, a line cut by a kill), the failure memo, keep-alive reuse and chunked bodies."""
from __future__ import annotations

import email.utils
import json
import os
import time

import pytest
from llm_server import LLMServer

from gristmill.llm.cache import RequestCache, request_key
from gristmill.llm.client import ClientConfig, Counters, LLMClient, _Limiter, retry_after


def test_retry_after_forms():
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after": "1.5"}) == 1.5
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after({"retry-after": "99999"}) == 600.0  # capped
    assert retry_after({}) is None and retry_after({"retry-after": "soon"}) is None
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= retry_after({"retry-after": date}) <= 31
    assert retry_after({"retry-after": email.utils.formatdate(time.time() - 30, usegmt=True)}) == 0.0


def test_limiter_books_requests_and_tokens():
    lim = _Limiter(rpm=60, tpm=None, burst=2)  # one request a second, a burst of two
    waits = [lim.reserve(0) for _ in range(4)]
    assert waits[0] == 0 and waits[1] == 0  # the burst
    assert 0.9 < waits[2] <= 1.0 and 1.9 < waits[3] <= 2.0
    tok = _Limiter(rpm=None, tpm=600, burst=1)  # 10 tokens a second, six seconds' worth as burst
    assert tok.reserve(60) == 0  # books 6 s: within the burst
    assert tok.reserve(60) == 0  # books up to 12 s: starts at 6 s, the burst's edge
    assert 5.5 < tok.reserve(60) <= 6.0  # starts at 12 s: waits 6 s


def test_limiter_shared_through_a_file_by_several_processes(tmp_path):
    path = str(tmp_path / "limits" / "x")
    a, b = _Limiter(60, None, 2, path), _Limiter(60, None, 2, path)  # two worker processes' limiters
    assert a.reserve(0) == 0 and b.reserve(0) == 0  # the burst, shared
    assert 0.9 < a.reserve(0) <= 1.0 and 1.9 < b.reserve(0) <= 2.0  # one book for both


def test_cache_files_from_several_writers_and_a_cut_line(tmp_path):
    a = RequestCache(str(tmp_path))
    a.put("k1", {"v": 1})
    b = RequestCache(str(tmp_path))
    b._pid = -1  # another writer: its own file
    b.put("k2", {"v": 2})
    files = sorted(os.listdir(tmp_path))
    assert len(files) == 2
    with open(tmp_path / files[0], "ab") as f:
        f.write(b'{"k": "k3", "v": {"v"')  # a line cut by a kill
    c = RequestCache(str(tmp_path))
    assert c.get("k1") == {"v": 1} and c.get("k2") == {"v": 2} and c.get("k3") is None and len(c) == 2
    assert request_key({"model": "m", "messages": []}, 0) == request_key({"messages": [], "model": "m"}, 0)
    assert request_key({"model": "m"}, 0) != request_key({"model": "m"}, 1)


def test_a_failed_request_is_not_asked_again_in_the_process(tmp_path):
    with LLMServer(status=503) as srv:
        c = LLMClient(ClientConfig(url=srv.url + "/chat/completions", max_retries=2, retry_base_delay=0.01,
                                   cache_dir=str(tmp_path)))
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        cn = Counters()
        first = c.post_many([body], counters=cn)
        assert "HTTP 503" in first[0].error and srv.n == 3 and cn.failures == 1 and cn.retries == 2
        again = c.post_many([body, body])
        assert again[0].error == first[0].error and srv.n == 3
    assert not os.listdir(tmp_path)  # a failure is not cached: a rerun asks again


def test_retry_after_is_waited_for():
    with LLMServer(fail_every=1, fail_status=(429,), retry_after="0.3") as srv:  # the first request: 429
        c = LLMClient(ClientConfig(url=srv.url + "/chat/completions", retry_base_delay=0.0))
        calls, orig = [], srv.handle

        def once(path, raw, n):
            calls.append(time.monotonic())
            if n > 1:
                srv.fail_every = 0
            return orig(path, raw, n)
        srv.handle = once
        out = c.post_many([{"model": "m", "messages": [{"role": "user", "content": "x"}]}])
    assert out[0].error is None and len(calls) == 2
    assert calls[1] - calls[0] >= 0.3  # never sooner than Retry-After (a lower bound, not a timing)


def test_keep_alive_and_chunked_bodies():
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    import threading
    conns = set()

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            conns.add(self.client_address)
            raw = json.dumps({"choices": [{"message": {"content": "chunked ok"}}]}).encode()
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (raw[:10], raw[10:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        c = LLMClient(ClientConfig(url=f"http://127.0.0.1:{srv.server_address[1]}/v1/chat/completions",
                                   max_concurrent=1))
        out = c.post_many([{"model": "m", "messages": [{"role": "user", "content": str(i)}]} for i in range(5)])
    finally:
        srv.shutdown()
    assert [o.response["choices"][0]["message"]["content"] for o in out] == ["chunked ok"] * 5
    assert len(conns) == 1  # one connection, kept alive


def test_embeddings():
    with LLMServer() as srv:
        c = LLMClient(ClientConfig(url=srv.url + "/embeddings"))
        texts = [f"text {i}" for i in range(5)]
        vecs = c.embed_many(texts, "embed-model", batch_size=2)
        assert srv.n == 3  # 2 + 2 + 1
        assert len(vecs) == 5 and all(len(v) == 8 for v in vecs)
        assert c.embed_many(texts[:2], "embed-model", batch_size=2) == vecs[:2] and srv.n == 3  # cached
