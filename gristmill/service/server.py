"""`gristmill serve`: the REST API (gristmill/service/api.py) and the web UI, with uvicorn.

Binds 127.0.0.1 unless told otherwise; any other host needs a token (``--token`` or ``GRISTMILL_TOKEN``),
which every API request must then send as ``Authorization: Bearer TOKEN``. Paths named in requests must lie
inside a ``--data-root`` (default: the current directory). Jobs and their files live in ``--state-dir``."""
from __future__ import annotations

import os
import sys

DEFAULT_STATE_DIR = ".gristmill-serve"


def add_arguments(p) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; anything but loopback requires --token)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free port)")
    p.add_argument("--data-root", action="append", default=[], metavar="DIR",
                   help="a directory whose files requests may read and write (repeatable; default: the current "
                        "directory; relative paths in requests are relative to the first)")
    p.add_argument("--token", default=None,
                   help="require 'Authorization: Bearer TOKEN' on every API request (default: $GRISTMILL_TOKEN)")
    p.add_argument("--state-dir", default=None,
                   help=f"where jobs are kept (default: {DEFAULT_STATE_DIR} in the first data root)")
    p.add_argument("--max-concurrent", type=int, default=1, help="jobs running at once (default 1)")
    add_trust_arguments(p)


def add_trust_arguments(p) -> None:
    """The switches that widen what requests may reach (docs/security.md), shared by serve and mcp."""
    p.add_argument("--allow-scripts", action="store_true",
                   help="allow ops that run user Python code and models' own code (trust_remote_code)")
    p.add_argument("--allow-private-urls", action="store_true",
                   help="let downloads reach loopback, link-local and private addresses (default: public only)")
    p.add_argument("--max-image-pixels", type=int, default=None, metavar="N",
                   help="decoded pixels per image or video frame (default 40,000,000; "
                        "$GRISTMILL_MAX_IMAGE_PIXELS)")


def _is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost."):
        return True
    import ipaddress
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_args(args) -> str | None:
    """Why the server must not start (one line), or None."""
    token = args.token if args.token is not None else os.environ.get("GRISTMILL_TOKEN") or None
    if token is not None and not token.strip():
        return "--token must not be empty"
    if token is not None and not token.isascii():
        return "--token must be ASCII"
    if not _is_loopback(args.host) and not token:
        return (f"refusing to listen on {args.host} without a token: anyone who can reach it could read and "
                f"write files under the data roots; give --token (or GRISTMILL_TOKEN), or bind 127.0.0.1")
    if args.max_concurrent < 1:
        return "--max-concurrent must be ≥ 1"
    if not 0 <= args.port <= 65535:
        return f"--port must be 0..65535, got {args.port}"
    for r in args.data_root or []:
        if not os.path.isdir(r):
            return f"--data-root {r!r} is not a directory"
    return None


def cmd_serve(args) -> int:
    why = check_args(args)
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    token = args.token if args.token is not None else os.environ.get("GRISTMILL_TOKEN") or None
    roots = [os.path.abspath(r) for r in (args.data_root or [os.getcwd()])]
    state = os.path.abspath(args.state_dir or os.path.join(roots[0], DEFAULT_STATE_DIR))
    import socket

    import uvicorn

    from ..engine.interrupt import Interrupted
    from .api import create_app
    from .jobs import JobManager
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host.strip("[]"), args.port))
        sock.listen(2048)  # connections wait in the backlog until uvicorn serves them
    except OSError as e:
        print(f"error: cannot listen on {args.host}:{args.port}: {e.strerror or e}", file=sys.stderr)
        return 2
    port = sock.getsockname()[1]
    manager = JobManager(state, roots, max_concurrent=args.max_concurrent, allow_scripts=args.allow_scripts,
                         allow_private_urls=args.allow_private_urls, max_image_pixels=args.max_image_pixels)
    try:
        hosts = None if token else ["127.0.0.1", "localhost", "::1", args.host]
        app = create_app(manager, token=token, allow_scripts=args.allow_scripts, allowed_hosts=hosts)
        config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
        server = uvicorn.Server(config)
        host = f"[{args.host.strip('[]')}]" if ":" in args.host else args.host
        print(f"gristmill serving on http://{host}:{port}/  (data roots: {', '.join(roots)}; jobs in {state}"
              f"{'; token required' if token else ''})", flush=True)
        try:
            server.run(sockets=[sock])
        except (Interrupted, KeyboardInterrupt):  # uvicorn re-raises the Ctrl-C it handled: a normal stop
            pass
        print("gristmill serve: stopped" + (" (running jobs interrupted: resume them)" if
                                            any(j["state"] == "running" for j in manager.list()) else ""),
              file=sys.stderr, flush=True)
    finally:
        manager.close()
        sock.close()
    return 0
