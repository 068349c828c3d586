"""A real S3 endpoint on 127.0.0.1 (moto's server, started here, stopped at the end) with test credentials
in the environment the way AWS tools read them (AWS_ACCESS_KEY_ID…, AWS_ENDPOINT_URL). A two-node Ray cluster on
this machine whose workers reach that endpoint only through the run (``s3_cluster``, one per module that
asks for it: add Ray cases to a module that already has one rather than starting another)."""
from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def s3_endpoint():
    pytest.importorskip("s3fs")
    server_mod = pytest.importorskip("moto.server")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(s3_endpoint, monkeypatch, tmp_path):
    """An S3FileSystem on the test server with one fresh bucket; the env points every client at it, and
    staging lives under tmp_path."""
    import uuid

    import s3fs
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": s3_endpoint, "GRISTMILL_STAGING": str(tmp_path / "staging"),
           "GRISTMILL_SYNC_S": "0.2", "GRISTMILL_LOCK_LEASE_S": "3"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(k, raising=False)
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem(endpoint_url=s3_endpoint)
    bucket = f"gm-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    fs.bucket = bucket
    yield fs
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture(scope="module")
def s3_cluster(s3_endpoint):
    """Two Ray nodes (1 CPU each) whose workers have S3 credentials in their environment but no endpoint:
    the run passes the endpoint to its tasks (remote_parts.worker_settings)."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster
    saved = dict(os.environ)
    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"})
    for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "GRISTMILL_STAGING"):
        os.environ.pop(k, None)
    try:
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        c.add_node(num_cpus=1)
        c.wait_for_nodes()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="session")
def gcs_endpoint():
    """A GCS JSON-API emulator on 127.0.0.1 (gcp-storage-emulator, in memory), started here."""
    pytest.importorskip("gcsfs")
    server_mod = pytest.importorskip("gcp_storage_emulator.server")
    server = server_mod.create_server("127.0.0.1", 0, in_memory=True)
    server.start()
    host, port = server._api._httpd.server_address
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def gcs(gcs_endpoint, monkeypatch, tmp_path):
    """A gcsfs filesystem on the emulator with one fresh bucket; STORAGE_EMULATOR_HOST points every client
    at it (gcsfs reads it), staging lives under tmp_path. gcsfs's gRPC bucket-kind lookup (its default since
    2025.9) is off: the emulator serves the JSON API only (docs/storage.md)."""
    import uuid

    env = {"STORAGE_EMULATOR_HOST": gcs_endpoint, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
           "GRISTMILL_STAGING": str(tmp_path / "staging"), "GRISTMILL_SYNC_S": "0.2", "GRISTMILL_LOCK_LEASE_S": "3"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    from gcsfs.core import GCSFileSystem  # the JSON-API class whatever gcsfs's default class is

    GCSFileSystem.clear_instance_cache()
    fs = GCSFileSystem(token="anon", project="test")
    bucket = f"gm-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    fs.bucket = bucket
    yield fs
    GCSFileSystem.clear_instance_cache()
