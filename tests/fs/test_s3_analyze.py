"""`gristmill inspect` and `gristmill analyze` on an s3:// dataset (moto's server on 127.0.0.1), analyze's work
dir on s3:// too: the same rows and the same stats as on local disk; a missing bucket is one line, exit 2."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys

import pytest

from gm_testutil import SAMPLE

pytestmark = pytest.mark.slow  # CLI runs in subprocesses against a server


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gristmill.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=os.environ.copy(), timeout=300)


def test_inspect_and_analyze_an_s3_dataset_like_the_local_one(s3, tmp_path):
    data = gzip.open(SAMPLE, "rb").read()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_bytes(data)
    s3.pipe_file(f"{s3.bucket}/in/a.jsonl", data)
    url = f"s3://{s3.bucket}/in/"
    where = ["--where", "len(text) > 100", "--json", "-n", "0"]
    loc = _cli("inspect", str(tmp_path / "in"), *where, cwd=tmp_path)
    rem = _cli("inspect", url, *where, cwd=tmp_path)
    assert loc.returncode == 0 and rem.returncode == 0, rem.stderr
    assert rem.stdout == loc.stdout and rem.stdout.count("\n") > 10

    ops = ["--ops", "words_num_filter", "--no-progress"]
    loc = _cli("analyze", str(tmp_path / "in"), "--work-dir", str(tmp_path / "lw"), *ops, cwd=tmp_path)
    rem = _cli("analyze", url, "--work-dir", f"s3://{s3.bucket}/aw", *ops, cwd=tmp_path)
    assert loc.returncode == 0 and rem.returncode == 0, rem.stderr
    for name in ("overall.csv", "stats.parquet"):
        assert s3.cat_file(f"{s3.bucket}/aw/analysis/{name}") == (tmp_path / "lw" / "analysis" / name).read_bytes()
    default = _cli("analyze", url, *ops, cwd=tmp_path)  # default work dir: a local temp dir
    assert default.returncode == 0, default.stderr

    for cmd in (["inspect", f"s3://no-such-bucket-{s3.bucket}/in/"], ["analyze", f"s3://no-such-bucket-{s3.bucket}/in/"],
                ["analyze", url, "--work-dir", f"s3://no-such-bucket-{s3.bucket}/w"]):
        r = _cli(*cmd, cwd=tmp_path)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "no-such-bucket" in lines[0], (cmd, r.stderr)
