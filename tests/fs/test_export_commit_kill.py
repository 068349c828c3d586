"""A run SIGKILLed inside an export's commit window (its files written at their final keys, its manifest not
yet) resumes to the bytes of an uninterrupted run: the intent record written before the first key claims
them for the rerun, while an object nobody recorded is still refused (exit 2). The kill is real: the
process SIGKILLs itself at the commit point named by ``GRISTMILL_FAULT`` (``staging.fault``)."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys

import pytest
import yaml

from gm_testutil import SAMPLE
from gristmill import fs
from gristmill.cli import main as cli_main
from gristmill.fs import staging

pytestmark = pytest.mark.slow  # a CLI run in a subprocess against a server: the slow tier (CI runs it)


def _tree(s3, prefix):
    """{name: bytes} of the objects under ``prefix`` (hidden ones aside)."""
    out = {}
    for k in s3.find(f"{s3.bucket}/{prefix}"):
        n = k.rsplit("/", 1)[-1]
        if not n.startswith("."):
            out[k[len(f"{s3.bucket}/{prefix}/"):]] = s3.cat_file(k)
    return out


def test_run_killed_between_export_files_and_manifest_resumes_to_the_same_bytes(s3, tmp_path):
    lines = gzip.open(SAMPLE, "rb").read().splitlines(keepends=True)[:120]
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(lines))

    def recipe(name, export):
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump({"dataset_path": str(src), "export_path": export, "export_shard_size": 20000,
                                     "work_dir": str(tmp_path / f"w-{name}"), "np": 1,
                                     "process": [{"words_num_filter": {"min_num": 5}}]}))
        return str(p)
    b = s3.bucket
    assert cli_main(["run", recipe("ref", f"s3://{b}/ref/clean.jsonl"), "--no-progress"]) == 0
    ref = _tree(s3, "ref")
    assert len(ref) >= 2, sorted(ref)  # a sharded export: several keys in the window
    out = f"s3://{b}/out/clean.jsonl"
    rec = recipe("out", out)
    env = {**os.environ, staging.FAULT_ENV: "export-commit"}
    p = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", rec, "--no-progress"], capture_output=True,
                       text=True, env=env, timeout=120)
    assert p.returncode == -9, p.stderr[-2000:]
    # killed inside the window: the files are at their final keys, no manifest commits them, the intent lists them
    assert _tree(s3, "out") == ref
    assert staging.read_manifest(out, False) is None
    assert set(staging.read_intent(out, False)["names"]) == set(ref)
    # a file nobody recorded, in the export's name space, is still refused before any work
    s3.pipe(f"{b}/out/clean.jsonl", b"someone else's\n")
    assert cli_main(["run", rec, "--no-progress"]) == 2
    s3.rm(f"{b}/out/clean.jsonl")
    # the rerun resumes: the same bytes, committed by the manifest, the intent gone
    assert cli_main(["run", rec, "--no-progress"]) == 0
    assert _tree(s3, "out") == ref
    assert sorted(e["name"] for e in staging.read_manifest(out, False)["files"]) == sorted(ref)
    assert not s3.exists(f"{b}/out/.clean.jsonl{staging.INTENT_SUFFIX}")


_COMMIT = """
import sys
from gristmill.engine.remote_parts import commit_composed
dest, parts = sys.argv[1], sys.argv[2:]
commit_composed([], dest, files=[(dest.rsplit(".", 1)[0] + f"-{i:05d}-of-{len(parts):05d}.jsonl", [p])
                                 for i, p in enumerate(parts)])
"""


def test_composed_export_killed_before_its_manifest_is_rerun_and_stale_shards_go(s3, tmp_path):
    """The Ray path's commit (``commit_composed``: server-side copies at the final keys) killed after its
    copies: the rerun overwrites them and deletes the shards of the export before the killed one, which the
    removed manifest no longer lists (the intent does)."""
    from gristmill.engine.remote_parts import commit_composed
    b = s3.bucket
    parts = [f"s3://{b}/work/p{i}.jsonl" for i in range(3)]
    for i, u in enumerate(parts):
        fs.write_bytes(u, f'{{"text": "row {i}"}}\n'.encode())

    def shards(dest, srcs):
        return [(dest.rsplit(".", 1)[0] + f"-{i:05d}-of-{len(srcs):05d}.jsonl", [p]) for i, p in enumerate(srcs)]
    commit_composed([], f"s3://{b}/ref/x.jsonl", files=shards(f"s3://{b}/ref/x.jsonl", parts[:2]))
    ref = _tree(s3, "ref")
    dest = f"s3://{b}/out/x.jsonl"
    commit_composed([], dest, files=shards(dest, parts))  # the previous export: three shards
    env = {**os.environ, staging.FAULT_ENV: "export-commit"}
    p = subprocess.run([sys.executable, "-c", _COMMIT, dest, *parts[:2]], capture_output=True, text=True, env=env,
                       timeout=60)
    assert p.returncode == -9, p.stderr[-2000:]
    assert staging.read_manifest(dest, False) is None
    names = [f"x-{i:05d}-of-00003.jsonl" for i in range(3)] + [f"x-{i:05d}-of-00002.jsonl" for i in range(2)]
    present = [f"s3://{b}/out/{n}" for n in names]
    assert staging.foreign_files(dest, False, present) == []  # what the pre-flight sees: all ours
    s3.pipe(f"{b}/out/x.jsonl", b"someone else's\n")  # nobody recorded it: still foreign
    assert staging.foreign_files(dest, False, present + [f"s3://{b}/out/x.jsonl"]) == [f"s3://{b}/out/x.jsonl"]
    s3.rm(f"{b}/out/x.jsonl")
    commit_composed([], dest, files=shards(dest, parts[:2]))
    assert _tree(s3, "out") == ref  # the old three shards deleted, the two new ones the uninterrupted bytes
    assert staging.read_intent(dest, False) is None
