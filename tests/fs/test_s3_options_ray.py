"""A run's storage_options reach its Ray tasks: a recipe whose only way to the bucket is its storage_options
(no endpoint or keys in the environment) reads its s3:// inputs in Ray tasks on a private instance and gives
the bytes of the same run on local files."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys

import pytest
import yaml

from gm_testutil import SAMPLE

pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # a Ray instance and a server


def test_recipe_options_reach_the_ray_tasks(s3, s3_endpoint, tmp_path, monkeypatch):
    b = s3.bucket
    lines = gzip.open(SAMPLE, "rb").read().splitlines(keepends=True)[:400]
    (tmp_path / "in").mkdir()
    for i in range(4):
        data = b"".join(lines[i::4])
        (tmp_path / "in" / f"p{i}.jsonl").write_bytes(data)
        s3.pipe(f"{b}/in/p{i}.jsonl", data)
    for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    outs = {}
    for name, src, opts in (("local", str(tmp_path / "in"), None),
                            ("s3", f"s3://{b}/in/", {f"s3://{b}/": {"endpoint_url": s3_endpoint, "key": "testing",
                                                                   "secret": "testing"}})):
        rec = {"dataset_path": src, "export_path": str(tmp_path / name / "out.jsonl"),
               "work_dir": str(tmp_path / name / "w"), "process": [{"words_num_filter": {"min_num": 20}}]}
        if opts:
            rec["storage_options"] = opts
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(rec))
        p = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(path), "--engine", "ray", "--np", "2",
                            "--no-progress"], capture_output=True, text=True, cwd=tmp_path, env=os.environ.copy(),
                           timeout=400)
        assert p.returncode == 0, p.stderr[-3000:]
        outs[name] = (tmp_path / name / "out.jsonl").read_bytes()
    assert outs["s3"] and outs["s3"] == outs["local"]
