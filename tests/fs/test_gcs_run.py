"""Runs whose inputs, export and work dir are gs:// URLs on a GCS emulator on 127.0.0.1 (gcp-storage-emulator's
JSON API, started by the tests; gcsfs reaches it through STORAGE_EMULATOR_HOST): the local-disk bytes, a
manifest-committed export, a resumed rerun, and a missing bucket refused before any work (exit 2). The
emulator does not honour ``ifGenerationMatch`` preconditions, so the work-dir lock's exclusive create is
tested on S3 only (test_s3_run.py)."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest
import yaml

from gm_testutil import SAMPLE

pytestmark = pytest.mark.slow  # CLI runs in subprocesses against a server: the slow tier (CI runs it)

OPS = [{"words_num_filter": {"min_num": 20}}, {"document_deduplicator": {}}]


def _recipe(tmp_path, name, **kw):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"process": OPS, "np": 2, **kw}))
    return str(path)


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gristmill.cli", *args, "--no-progress"], capture_output=True,
                          text=True, cwd=cwd, env=os.environ.copy(), timeout=300)


def _inputs(gcs, tmp_path, n=4):
    lines = gzip.open(SAMPLE, "rb").read().splitlines(keepends=True)
    local = tmp_path / "in"
    local.mkdir()
    per = -(-len(lines) // n)
    for i in range(n):
        p = local / f"part-{i}.jsonl"
        p.write_bytes(b"".join(lines[i * per:(i + 1) * per]))
        gcs.put_file(str(p), f"{gcs.bucket}/in/part-{i}.jsonl")
    return str(local), f"gs://{gcs.bucket}/in/"


def test_run_on_gcs_gives_the_local_bytes(gcs, tmp_path):
    local_in, url_in = _inputs(gcs, tmp_path)
    b = gcs.bucket
    for ext in ("jsonl", "parquet"):
        loc = _cli("run", _recipe(tmp_path, f"l{ext}", dataset_path=local_in, export_path=f"{tmp_path}/out/clean.{ext}",
                                  work_dir=f"{tmp_path}/work-{ext}"), cwd=tmp_path)
        assert loc.returncode == 0, loc.stderr
        rem = _cli("run", _recipe(tmp_path, f"r{ext}", dataset_path=url_in, export_path=f"gs://{b}/out/clean.{ext}",
                                  work_dir=f"gs://{b}/work-{ext}"), cwd=tmp_path)
        assert rem.returncode == 0, rem.stderr
        gcs.invalidate_cache()
        assert gcs.cat_file(f"{b}/out/clean.{ext}") == (tmp_path / f"out/clean.{ext}").read_bytes()
        man = json.loads(gcs.cat_file(f"{b}/out/.clean.{ext}.gristmill-manifest.json"))
        assert [f["name"] for f in man["files"]] == [f"clean.{ext}"]
        rep = json.loads(gcs.cat_file(f"{b}/work-{ext}/report.json"))
        assert f"gs://{b}/out/clean.{ext}" in json.dumps(rep) and str(tmp_path / "staging") not in json.dumps(rep)
        assert not gcs.exists(f"{b}/work-{ext}/.lock")  # released
    keys = [k[len(b) + 1:] for k in gcs.find(f"{b}/work-jsonl")]
    assert "work-jsonl/manifest.json" in keys and any("/done/" in k for k in keys)
    # a rerun on a wiped staging disk restores the work dir from the bucket and gives the same export
    import shutil
    shutil.rmtree(tmp_path / "staging")
    again = _cli("run", str(tmp_path / "rjsonl.yaml"), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "restored" in again.stdout + again.stderr
    gcs.invalidate_cache()
    assert gcs.cat_file(f"{b}/out/clean.jsonl") == (tmp_path / "out/clean.jsonl").read_bytes()


def test_missing_bucket_is_refused_before_any_work(gcs, tmp_path):
    b = gcs.bucket
    gcs.pipe(f"{b}/in/a.jsonl", b'{"text": "one two three"}\n')
    before = sorted(gcs.find(b))
    for key, value in (("export_path", "gs://gm-no-such-bucket/out/c.jsonl"),
                       ("work_dir", "gs://gm-no-such-bucket/work"),
                       ("dataset_path", "gs://gm-no-such-bucket/in/")):
        r = {"dataset_path": f"gs://{b}/in/", "export_path": f"gs://{b}/out/c.jsonl", "work_dir": f"gs://{b}/w",
             key: value}
        p = _cli("run", _recipe(tmp_path, "m", **r), cwd=tmp_path)
        err = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
        assert p.returncode == 2 and len(err) == 1, p.stderr
        assert "gm-no-such-bucket" in err[0] and "bucket does not exist" in err[0], err
        gcs.invalidate_cache()
        assert sorted(gcs.find(b)) == before  # nothing written
        assert not (tmp_path / "staging").exists()
