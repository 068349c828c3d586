"""A local HTTP server on 127.0.0.1 with ranges, validators and injectable faults, for download tests."""
from __future__ import annotations

import base64
import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeServer:
    """``files``: path → bytes. ``faults``: path → list of actions used up one per request:
    ``("drop", n)`` send n bytes of the body then cut the connection; ``("status", code)`` answer with that
    HTTP error; ``("corrupt",)`` send wrong bytes of the right length; ``("ignore_range",)`` answer 200 in
    full even to a Range request."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.faults: dict[str, list] = {}
        self.log: list[tuple[str, str | None]] = []
        self.digest = False  # send Repr-Digest: sha-256
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                path = self.path
                rng = self.headers.get("Range")
                with server.lock:
                    server.log.append((path, rng))
                    fault = server.faults.get(path, []).pop(0) if server.faults.get(path) else None
                if path not in server.files:
                    return self._error(404, "Not Found")
                if fault and fault[0] == "status":
                    return self._error(fault[1], "Injected")
                data = server.files[path]
                etag = '"' + hashlib.md5(data).hexdigest() + '"'
                start = 0
                if rng and not (fault and fault[0] == "ignore_range"):
                    if_range = self.headers.get("If-Range")
                    if if_range is None or if_range == etag:
                        start = int(rng.split("=")[1].split("-")[0])
                if start >= len(data) and start:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = data[start:]
                if fault and fault[0] == "corrupt":
                    body = bytes(b ^ 0xFF for b in body)
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", etag)
                self.send_header("Accept-Ranges", "bytes")
                if server.digest:
                    d = base64.b64encode(hashlib.sha256(data).digest()).decode()
                    self.send_header("Repr-Digest", f"sha-256=:{d}:")
                self.end_headers()
                if fault and fault[0] == "drop":
                    self.wfile.write(body[: fault[1]])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.wfile.write(body)

            def _error(self, code, msg):
                body = f"{code} {msg}".encode()
                self.send_response(code, msg)
                self.send_header("Content-Length", str(len(body)))
                if code in (429, 503):
                    self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    def requests_for(self, path):
        return [r for p, r in self.log if p == path]
