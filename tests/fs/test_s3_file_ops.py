"""s3_download_file_mapper / s3_upload_file_mapper against a real S3 endpoint (moto's server, tests/fs/conftest.py):
files go up under the prefix and the field becomes their URLs, come back into save_dir and/or as bytes, list
and single-value fields keep their shapes, failures keep the value and the row, credentials never reach the
op's config."""
from __future__ import annotations

import os

import pytest

from gristmill.core import trust
from gristmill.registry import create_op


@pytest.fixture
def files(tmp_path):
    d = tmp_path / "local"
    d.mkdir()
    out = {}
    for name, data in (("a.bin", b"alpha" * 100), ("b.txt", b"bravo\n"), ("c.jpg", bytes(range(256)))):
        (d / name).write_bytes(data)
        out[name] = (str(d / name), data)
    return out


def test_upload_then_download(s3, files, tmp_path):
    up = create_op("s3_upload_file_mapper", {"upload_field": "videos", "s3_bucket": s3.bucket, "s3_prefix": "clips"})
    rows = [{"videos": [files["a.bin"][0], files["b.txt"][0]]}, {"videos": [files["c.jpg"][0], "s3://x/already.mp4",
                                                                            str(tmp_path / "missing.mp4")]}]
    out = up.apply(rows)
    url = f"s3://{s3.bucket}/clips/"
    assert [r["videos"] for r in out] == [[url + "a.bin", url + "b.txt"],
                                          [url + "c.jpg", "s3://x/already.mp4", str(tmp_path / "missing.mp4")]]
    assert s3.cat_file(f"{s3.bucket}/clips/b.txt") == b"bravo\n"
    assert all(os.path.exists(p) for p, _ in files.values())  # remove_local: false

    # skip_existing: an object already there is not replaced; remove_local deletes the local file
    (tmp_path / "local" / "b.txt").write_bytes(b"changed")
    out = create_op("s3_upload_file_mapper", {"upload_field": "f", "s3_bucket": s3.bucket, "s3_prefix": "clips/",
                                              "remove_local": True}).apply([{"f": files["b.txt"][0]}])
    assert out == [{"f": url + "b.txt"}] and not os.path.exists(files["b.txt"][0])
    assert s3.cat_file(f"{s3.bucket}/clips/b.txt") == b"bravo\n"

    # download: into save_dir (the field rewritten) and as bytes
    save = tmp_path / "dl"
    down = create_op("s3_download_file_mapper", {"download_field": "videos", "save_dir": str(save),
                                                 "save_field": "data"})
    got = down.apply([{"videos": [url + "a.bin", url + "nope.bin"]}, {"videos": [files["c.jpg"][0]]},
                      {"videos": ["https://example.com/x.jpg"]}])
    assert got[0]["videos"] == [str(save / "a.bin"), url + "nope.bin"]  # a failed download keeps its URL
    assert got[0]["data"] == [b"alpha" * 100, None]
    assert (save / "a.bin").read_bytes() == b"alpha" * 100
    assert got[1] == {"videos": [files["c.jpg"][0]], "data": [bytes(range(256))]}  # local: read, left in place
    assert got[2] == {"videos": ["https://example.com/x.jpg"], "data": [None]}  # http(s): not this op's
    assert sorted(os.listdir(save)) == ["a.bin"]  # no partial file left by the failure

    # neither save_dir nor save_field: bytes to image_bytes, single values stay single
    got = create_op("s3_download_file_mapper", {"download_field": "u"}).apply([{"u": url + "c.jpg"}, {"u": None}])
    assert got == [{"u": url + "c.jpg", "image_bytes": bytes(range(256))}, {"u": None, "image_bytes": None}]


def test_mixed_shapes_in_one_batch(s3, files, tmp_path):
    """A field holding a list in some rows and one value in others (held as JSON, as the readers hold it)."""
    from gristmill.core import columns as C
    up = create_op("s3_upload_file_mapper", {"upload_field": "f", "s3_bucket": s3.bucket})
    out = C.to_pylist(up.apply(C.from_records([{"f": [files["a.bin"][0]]}, {"f": files["b.txt"][0]}])))
    assert out == [{"f": [f"s3://{s3.bucket}/a.bin"]}, {"f": f"s3://{s3.bucket}/b.txt"}]
    down = create_op("s3_download_file_mapper", {"download_field": "f", "save_field": "b"})
    got = C.to_pylist(down.apply(C.from_records(out)))
    assert [r["b"] for r in got] == [[b"alpha" * 100], [b"bravo\n"]]  # bytes of mixed shapes: all lists


def test_resume_and_refusals(s3, files, tmp_path):
    s3.pipe_file(f"{s3.bucket}/k/x.bin", b"remote")
    url = f"s3://{s3.bucket}/k/x.bin"
    save = tmp_path / "dl"
    save.mkdir()
    (save / "x.bin").write_bytes(b"local copy")
    op = {"download_field": "u", "save_dir": str(save), "save_field": "b"}
    with pytest.raises(ValueError, match="b is already in the samples"):
        create_op("s3_download_file_mapper", op).apply([{"u": url, "b": None}])
    got = create_op("s3_download_file_mapper", dict(op, resume_download=True)).apply(
        [{"u": url, "b": None}, {"u": url, "b": b"kept"}])
    assert [r["b"] for r in got] == [b"local copy", b"kept"]  # the file in save_dir is reused, bytes kept
    got = create_op("s3_download_file_mapper", {"download_field": "u", "save_dir": str(save)}).apply([{"u": url}])
    assert (save / "x.bin").read_bytes() == b"remote"  # without resume: downloaded again
    with pytest.raises(Exception, match="s3_bucket"):
        create_op("s3_upload_file_mapper", {"upload_field": "u"})
    with trust.active(trust.service_policy([str(tmp_path)])):
        with pytest.raises(trust.Refused, match="trust policy"):
            create_op("s3_download_file_mapper", {"download_field": "u"})


def test_credentials_from_params_and_endpoint(s3, s3_endpoint, files, monkeypatch):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(k)
    params = {"upload_field": "f", "s3_bucket": s3.bucket, "aws_access_key_id": "testing",
              "aws_secret_access_key": "testing", "endpoint_url": s3_endpoint}
    op = create_op("s3_upload_file_mapper", params)
    assert op.apply([{"f": files["a.bin"][0]}]) == [{"f": f"s3://{s3.bucket}/a.bin"}]
    assert "aws_secret_access_key" not in op.config()["params"] and "aws_access_key_id" not in op.config()["params"]
