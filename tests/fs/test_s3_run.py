"""Runs whose inputs, export, work dir and token output are s3:// URLs on a real S3 endpoint (moto's server on
127.0.0.1): the same bytes as on local disk, a SIGKILLed run resuming to the same bytes, and the refusals made
before any work (missing bucket, busy work dir, foreign objects)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from gm_testutil import SAMPLE
from gristmill.cli import main as cli_main

pytestmark = pytest.mark.slow  # CLI runs in subprocesses against a server: the slow tier (CI runs it)

OPS = [{"words_num_filter": {"min_num": 20}}, {"document_deduplicator": {}}]


def _recipe(tmp_path, name, **kw):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"process": OPS, "np": 2, **kw}))
    return str(path)


def _cli(*args, cwd):
    quiet = ["--no-progress"] if args[0] in ("run", "tokenize") else []
    return subprocess.run([sys.executable, "-m", "gristmill.cli", *args, *quiet], capture_output=True,
                          text=True, cwd=cwd, env=os.environ.copy(), timeout=300)


def _local(*args):
    """A local reference run in this process (what is compared is its bytes, not the process): saves a
    subprocess start per run. The runs on s3:// stay subprocesses, as users start them."""
    assert cli_main([*args, "--no-progress"]) == 0


def _inputs(s3, tmp_path, n=6):
    """``n`` JSONL files (many shards) locally and the same under s3://BUCKET/in/."""
    import gzip
    lines = gzip.open(SAMPLE, "rb").read().splitlines(keepends=True)
    local = tmp_path / "in"
    local.mkdir()
    per = -(-len(lines) // n)
    for i in range(n):
        p = local / f"part-{i}.jsonl"
        p.write_bytes(b"".join(lines[i * per:(i + 1) * per]))
        s3.put_file(str(p), f"{s3.bucket}/in/part-{i}.jsonl")
    return str(local), f"s3://{s3.bucket}/in/"


def _get(s3, key):
    return s3.cat_file(f"{s3.bucket}/{key}")


def test_run_on_s3_gives_the_local_bytes_and_commits_export_with_a_manifest(s3, tmp_path):
    local_in, url_in = _inputs(s3, tmp_path)
    b = s3.bucket
    for ext in ("jsonl", "parquet"):
        _local("run", _recipe(tmp_path, f"l{ext}", dataset_path=local_in, export_path=f"{tmp_path}/out/clean.{ext}",
                              work_dir=f"{tmp_path}/work-{ext}"))
        rem = _cli("run", _recipe(tmp_path, f"r{ext}", dataset_path=url_in, export_path=f"s3://{b}/out/clean.{ext}",
                                  work_dir=f"s3://{b}/work-{ext}"), cwd=tmp_path)
        assert rem.returncode == 0, rem.stderr
        assert _get(s3, f"out/clean.{ext}") == (tmp_path / f"out/clean.{ext}").read_bytes()
        man = json.loads(_get(s3, f"out/.clean.{ext}.gristmill-manifest.json"))
        assert [f["name"] for f in man["files"]] == [f"clean.{ext}"]
        rep = json.loads(_get(s3, f"work-{ext}/report.json"))
        assert f"s3://{b}/out/clean.{ext}" in json.dumps(rep) and str(tmp_path / "staging") not in json.dumps(rep)
        assert not s3.exists(f"{b}/work-{ext}/.lock")  # released
    # rejects and removed rows are in the work dir in the bucket, as locally
    keys = [k[len(b) + 1:] for k in s3.find(f"{b}/work-jsonl")]
    assert "work-jsonl/manifest.json" in keys and any("/done/" in k for k in keys)
    # a second run over the same work dir resumes everything: the same export
    again = _cli("run", str(tmp_path / "rjsonl.yaml"), cwd=tmp_path)
    assert again.returncode == 0 and _get(s3, "out/clean.jsonl") == (tmp_path / "out/clean.jsonl").read_bytes()


def test_sharded_export_on_s3(s3, tmp_path):
    local_in, url_in = _inputs(s3, tmp_path, n=3)
    b = s3.bucket
    kw = {"export_shard_size": 60_000}
    _local("run", _recipe(tmp_path, "l", dataset_path=local_in, export_path=f"{tmp_path}/o/c.jsonl.gz",
                          work_dir=f"{tmp_path}/w", **kw))
    r = _cli("run", _recipe(tmp_path, "r", dataset_path=url_in, export_path=f"s3://{b}/o/c.jsonl.gz",
                            work_dir=f"s3://{b}/w", **kw), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    local = sorted(p.name for p in (tmp_path / "o").iterdir() if not p.name.startswith("."))
    assert len(local) > 1
    remote = sorted(k.rsplit("/", 1)[1] for k in s3.find(f"{b}/o") if not k.rsplit("/", 1)[1].startswith("."))
    assert remote == local
    assert all(_get(s3, f"o/{n}") == (tmp_path / "o" / n).read_bytes() for n in local)


def test_sigkilled_run_resumes_from_the_bucket_to_the_same_bytes(s3, tmp_path):
    local_in, url_in = _inputs(s3, tmp_path, n=12)
    b = s3.bucket
    slow = {"python_lambda_mapper": {"lambda_str": "lambda s: (__import__('time').sleep(0.015), s)[1]"}}
    # ~0.2 s a shard, 2.7 s in all: killed after the first shard is committed, well before the end
    ops = [slow, {"words_num_filter": {"min_num": 20}}]
    _local("run", _recipe(tmp_path, "l", dataset_path=local_in, export_path=f"{tmp_path}/out/c.jsonl",
                          work_dir=f"{tmp_path}/w", process=ops, np=1), "--allow-scripts")
    rec = _recipe(tmp_path, "r", dataset_path=url_in, export_path=f"s3://{b}/out/c.jsonl", work_dir=f"s3://{b}/w",
                  process=ops, np=1)
    env = {**os.environ, "GRISTMILL_SYNC_S": "0.05"}
    p = subprocess.Popen([sys.executable, "-m", "gristmill.cli", "run", rec, "--no-progress", "--allow-scripts"],
                         cwd=tmp_path, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        s3.invalidate_cache()
        if any("/done/" in k for k in s3.find(f"{b}/w")):
            break
        time.sleep(0.02)
    os.killpg(p.pid, signal.SIGKILL)  # the run and its workers
    p.wait()
    s3.invalidate_cache()
    assert not s3.exists(f"{b}/out/.c.jsonl.gristmill-manifest.json"), "the run finished before the kill"
    committed = [k for k in s3.find(f"{b}/w") if "/done/" in k]
    assert committed and s3.exists(f"{b}/w/.lock")  # killed: its lease is left to expire
    # resume on a wiped staging disk (another machine): everything comes from the bucket
    os.environ["GRISTMILL_STAGING"] = str(tmp_path / "staging2")
    # the lease (3 s in the tests, renewed every second until the kill) expires: waited for, not slept for
    expires = json.loads(_get(s3, "w/.lock"))["expires"]
    time.sleep(max(0.0, expires - time.time()) + 0.1)
    r = _cli("run", rec, "--allow-scripts", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert _get(s3, "out/c.jsonl") == (tmp_path / "out/c.jsonl").read_bytes()
    assert "restored" in r.stderr
    # the committed shards were reused, not recomputed (their markers point into this staging copy now)
    import re
    done = re.search(r"(\d+) of 12 shards already done, skipped", r.stderr)
    assert done and int(done.group(1)) >= len(committed), r.stderr


def test_missing_bucket_is_refused_before_any_work(s3, tmp_path):
    b = s3.bucket
    s3.pipe(f"{b}/in/a.jsonl", b'{"text": "one two three"}\n')
    before = sorted(s3.find(b))
    for key, value in (("export_path", "s3://gm-no-such-bucket/out/c.jsonl"),
                       ("work_dir", "s3://gm-no-such-bucket/work"),
                       ("dataset_path", "s3://gm-no-such-bucket/in/")):
        r = {"dataset_path": f"s3://{b}/in/", "export_path": f"s3://{b}/out/c.jsonl", "work_dir": f"s3://{b}/w",
             key: value}
        p = _cli("run", _recipe(tmp_path, "m", **r), cwd=tmp_path)
        err = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
        assert p.returncode == 2 and len(err) == 1, p.stderr
        assert "gm-no-such-bucket" in err[0] and "bucket does not exist" in err[0], err
        assert sorted(s3.find(b)) == before  # nothing written (the probe goes only after every bucket answered)
        assert not (tmp_path / "staging").exists() and not (tmp_path / "s3:").exists()


def test_no_credentials_and_busy_work_dir_are_one_line_refusals(s3, tmp_path, monkeypatch):
    b = s3.bucket
    s3.pipe(f"{b}/in/a.jsonl", b'{"text": "one two three four five"}\n')
    rec = _recipe(tmp_path, "c", dataset_path=f"s3://{b}/in/", export_path=f"s3://{b}/out/c.jsonl",
                  work_dir=f"s3://{b}/w")
    s3.pipe(f"{b}/w/.lock", json.dumps({"owner": "x", "pid": 1, "host": "h", "expires": time.time() + 600}).encode())
    p = _cli("run", rec, cwd=tmp_path)
    assert p.returncode == 2 and "is in use by another run" in p.stderr, p.stderr
    s3.rm_file(f"{b}/w/.lock")
    s3.pipe(f"{b}/out/c.jsonl", b"not ours\n")
    p = _cli("run", rec, cwd=tmp_path)
    assert p.returncode == 2 and "was not written by gristmill" in p.stderr, p.stderr
    assert _get(s3, "out/c.jsonl") == b"not ours\n"
    s3.rm_file(f"{b}/out/c.jsonl")
    with monkeypatch.context() as m:  # no credentials anywhere: refused in one line naming the URL
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            m.delenv(k)
        m.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
        m.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
        m.setenv("AWS_EC2_METADATA_DISABLED", "true")
        p = _cli("run", rec, cwd=tmp_path)
        err = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
        assert p.returncode == 2 and len(err) == 1 and "no valid credentials" in err[0], p.stderr
        assert f"s3://{b}/in/" in err[0]
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONG")
    # moto accepts any key; what matters here is that a key never reaches the message
    p = _cli("run", rec, cwd=tmp_path)
    assert "wrong-secret-value" not in p.stderr + p.stdout


def test_tokenize_output_and_work_dir_on_s3_give_the_local_tokens(s3, tmp_path):
    pytest.importorskip("tiktoken")
    b = s3.bucket
    s3.put_file(str(SAMPLE), f"{b}/in/cc.jsonl.gz")
    for name, src, out, work in (("l", str(SAMPLE), str(tmp_path / "tok"), str(tmp_path / "tw")),
                                 ("r", f"s3://{b}/in/cc.jsonl.gz", f"s3://{b}/tok", f"s3://{b}/tw")):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({"dataset_path": src, "tokenizer": "cl100k_base",
                                                                "output": out}))
        p = _cli("tokenize", str(tmp_path / f"{name}.yaml"), "--work-dir", work, cwd=tmp_path)
        if p.returncode and "cl100k_base" in p.stderr and name == "l":
            pytest.skip(f"no offline cl100k_base here: {p.stderr[-200:]}")
        assert p.returncode == 0, p.stderr
    arrays = sorted(p.name for p in (tmp_path / "tok").iterdir() if p.suffix == ".npy")
    assert "data.npy" in arrays
    for n in arrays:
        assert _get(s3, f"tok/{n}") == (tmp_path / "tok" / n).read_bytes(), n
    assert s3.exists(f"{b}/tok/gristmill-manifest.json")
    again = _cli("tokenize", str(tmp_path / "r.yaml"), "--work-dir", f"s3://{b}/tw", cwd=tmp_path)
    assert again.returncode == 0, again.stderr  # its own manifest is no foreign object
    assert _get(s3, "tok/data.npy") == (tmp_path / "tok" / "data.npy").read_bytes()


def test_memory_url_outputs_in_process(tmp_path, monkeypatch):
    """The Python API path (no subprocess): memory:// export and work dir."""
    import fsspec
    monkeypatch.setenv("GRISTMILL_STAGING", str(tmp_path / "staging"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({"dataset_path": str(SAMPLE), "export_path": "memory://gmt/o.jsonl",
                                                     "work_dir": "memory://gmt/w", "process": OPS}))
    (tmp_path / "l.yaml").write_text(yaml.safe_dump({"dataset_path": str(SAMPLE), "export_path": "o.jsonl",
                                                     "work_dir": "w", "process": OPS}))
    assert cli_main(["run", "r.yaml", "--no-progress"]) == 0
    assert cli_main(["run", "l.yaml", "--no-progress"]) == 0
    m = fsspec.filesystem("memory")
    assert m.cat_file("/gmt/o.jsonl") == (tmp_path / "o.jsonl").read_bytes()
    m.rm("/gmt", recursive=True)


def test_head_and_split_read_and_write_s3(s3, tmp_path):
    local_in, url_in = _inputs(s3, tmp_path, n=3)
    b = s3.bucket
    h = _cli("head", url_in, "-n", "2", cwd=tmp_path)
    assert h.returncode == 0 and h.stdout == _cli("head", local_in, "-n", "2", cwd=tmp_path).stdout, h.stderr
    assert len(h.stdout.splitlines()) == 2
    loc = _cli("split", local_in, "-o", str(tmp_path / "parts"), "-n", "3", cwd=tmp_path)
    assert loc.returncode == 0, loc.stderr
    rem = _cli("split", url_in, "-o", f"s3://{b}/parts", "-n", "3", cwd=tmp_path)
    assert rem.returncode == 0, rem.stderr
    names = sorted(p.name for p in (tmp_path / "parts").iterdir() if not p.name.startswith("."))
    assert len(names) == 3
    for n in names:
        assert _get(s3, f"parts/{n}") == (tmp_path / "parts" / n).read_bytes()
    assert json.loads(_get(s3, "parts/gristmill-manifest.json"))["files"]
    s3.pipe(f"{b}/other/x.jsonl", b"{}\n")
    bad = _cli("split", url_in, "-o", f"s3://{b}/other", "-n", "2", cwd=tmp_path)
    assert bad.returncode == 2 and "not written by gristmill split" in bad.stderr, bad.stderr


def test_one_recipe_with_every_path_on_s3_gives_the_local_export_and_tokens(s3, tmp_path):
    """The issue's done-when: inputs, export, work dir and tokenize output all s3:// URLs in one recipe."""
    pytest.importorskip("tiktoken")
    local_in, url_in = _inputs(s3, tmp_path, n=3)
    b = s3.bucket
    ops = [{"words_num_filter": {"min_num": 20}}]
    loc = _cli("run", _recipe(tmp_path, "l", dataset_path=local_in, export_path=f"{tmp_path}/out/c.jsonl",
                              work_dir=f"{tmp_path}/w", process=ops,
                              tokenize={"tokenizer": "cl100k_base", "output": f"{tmp_path}/tok"}), cwd=tmp_path)
    if loc.returncode and "cl100k_base" in loc.stderr:
        pytest.skip(f"no offline cl100k_base here: {loc.stderr[-200:]}")
    assert loc.returncode == 0, loc.stderr
    rem = _cli("run", _recipe(tmp_path, "r", dataset_path=url_in, export_path=f"s3://{b}/out/c.jsonl",
                              work_dir=f"s3://{b}/w", process=ops,
                              tokenize={"tokenizer": "cl100k_base", "output": f"s3://{b}/tok"}), cwd=tmp_path)
    assert rem.returncode == 0, rem.stderr
    assert _get(s3, "out/c.jsonl") == (tmp_path / "out/c.jsonl").read_bytes()
    arrays = sorted(p.name for p in (tmp_path / "tok").iterdir() if p.suffix == ".npy")
    assert "data.npy" in arrays and all(_get(s3, f"tok/{n}") == (tmp_path / "tok" / n).read_bytes() for n in arrays)


def test_recipe_storage_options_reach_the_bucket_and_stay_out_of_reports(s3, s3_endpoint, tmp_path, monkeypatch):
    """No endpoint or keys in the environment: the recipe's storage_options (per prefix) give them; the
    secret is in no report, log or manifest."""
    b = s3.bucket
    s3.pipe(f"{b}/in/a.jsonl", b'{"text": "one two three four five six"}\n')
    for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    secret = "sekrit-value-123"
    rec = _recipe(tmp_path, "o", dataset_path=f"s3://{b}/in/", export_path=f"s3://{b}/out/c.jsonl",
                  work_dir=f"s3://{b}/w", process=[{"words_num_filter": {"min_num": 2}}],
                  storage_options={f"s3://{b}/": {"endpoint_url": s3_endpoint, "key": "testing", "secret": secret}})
    p = _cli("run", rec, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert _get(s3, "out/c.jsonl").count(b"\n") == 1
    texts = [p.stdout, p.stderr] + [_get(s3, k[len(b) + 1:]).decode("utf-8", "replace")
                                    for k in s3.find(b) if k.endswith((".json", ".jsonl", ".html"))]
    assert not any(secret in t for t in texts)
