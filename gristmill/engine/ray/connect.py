"""Joining (or starting) a Ray cluster quietly, and leaving it as found.

Ray is an optional dependency: everything that needs it goes through ``require_ray``, whose error is one
line the CLI prints with exit status 2."""
from __future__ import annotations

import logging
import os


class RayUnavailable(ValueError):
    """Ray is not installed, or the cluster cannot be reached (a ValueError: refused before work starts)."""


def require_ray():
    """The ``ray`` module, or ``RayUnavailable`` saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise RayUnavailable(f"engine 'ray' needs Ray: pip install 'gristmill[ray]' ({e})") from None
    return ray


def connect(address: str | None, num_cpus: int) -> bool:
    """Connect this process to Ray; returns True when it started a Ray instance of its own (which the
    caller then shuts down), False when it joined a running cluster or one this process was already on.

    ``address`` None starts a local instance with ``num_cpus`` CPUs (unless ``RAY_ADDRESS`` names a
    cluster, as in a job started by ``ray job submit``); ``"auto"`` joins the cluster started on this node
    by ``ray start``; ``HOST:PORT`` a remote one."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    started = address is None and not os.environ.get("RAY_ADDRESS")
    kw: dict = dict(logging_level=logging.WARNING, log_to_driver=True)
    if started:
        kw.update(num_cpus=num_cpus, include_dashboard=False)
        # "token authentication is enabled" on every start of a private, single-machine instance
        logging.getLogger("ray._private.authentication").setLevel(logging.ERROR)
    if address and address != "auto":
        _probe(address)
    from ...core import trust
    policy = trust.current()
    if policy != trust.Policy():  # a restricted run (a service job): every Ray worker runs under its policy
        kw["runtime_env"] = {"env_vars": {trust.ENV: trust.to_env(policy)}}
    try:
        # "local": a new instance even when this machine runs a cluster (ray start, another user's job)
        # that a plain ray.init() would silently join
        ray.init(address="local" if started else address, **kw)
    except (ConnectionError, RuntimeError, ValueError) as e:
        where = address or os.environ.get("RAY_ADDRESS")
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RayUnavailable(f"cannot join the Ray cluster at {where!r}: {msg} (start one with `ray start "
                             f"--head`, or leave the address out to run on a local Ray instance)") from None
    _quiet()
    return started


def _probe(address: str) -> None:
    """Fail in seconds, in one line, when nothing listens at ``HOST:PORT`` (Ray itself retries for minutes)."""
    import socket
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise RayUnavailable(f"Ray address {address!r}: expected auto or HOST:PORT (e.g. 10.0.0.1:6379)")
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as e:
        raise RayUnavailable(f"cannot reach the Ray cluster at {address}: {e.strerror or e} (is `ray start --head` "
                             "running there, and is the port open?)") from None


def _quiet() -> None:
    """Ray's own INFO lines (autoscaler, worker start-up) would drown the CLI's progress and table."""
    for name in ("ray", "ray.data", "ray.tune", "ray.serve"):
        logging.getLogger(name).setLevel(logging.WARNING)


def shutdown() -> None:
    ray = require_ray()
    if ray.is_initialized():
        ray.shutdown()
