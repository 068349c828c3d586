"""gristmill download against a local HTTP server with dropped connections, HTTP errors and bad bytes."""
import gzip
import hashlib
import json
import os

import pytest

from fakehttp import FakeServer
from gristmill.web.download import download, plan

FAST = {"backoff": 0.01, "timeout": 10}


def _blob(n, seed):
    out, x = bytearray(), seed
    while len(out) < n:
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out += x.to_bytes(8, "little")
    return bytes(out[:n])


@pytest.fixture
def server():
    with FakeServer() as s:
        for i in range(4):
            s.files[f"/data/f{i}.warc.gz"] = _blob(200_000 + 1000 * i, i + 1)
        yield s


def _urls(server, n=4):
    return [f"{server.url}/data/f{i}.warc.gz" for i in range(n)]


def _dest(out, server, i):
    return os.path.join(out, f"127.0.0.1:{server.url.rsplit(':', 1)[1]}", "data", f"f{i}.warc.gz")


def _no_partials(root):
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if ".part" in f]


def test_parallel_download_of_a_url_list(server, tmp_path):
    lst = tmp_path / "urls.txt"
    lst.write_text("# a comment\n" + "\n".join(_urls(server)) + "\n\n")
    out = str(tmp_path / "out")
    rep = download(str(lst), out, workers=3, **FAST)
    assert rep.counts() == {"downloaded": 4, "skipped": 0, "failed": 0}
    for i in range(4):
        with open(_dest(out, server, i), "rb") as f:
            assert f.read() == server.files[f"/data/f{i}.warc.gz"]
    assert _no_partials(out) == []
    saved = json.load(open(os.path.join(out, "download-report.json")))
    assert saved["counts"]["downloaded"] == 4 and saved["bytes"] == sum(len(v) for v in server.files.values())


def test_dropped_connection_resumes_with_a_range_request(server, tmp_path):
    path = "/data/f1.warc.gz"
    server.faults[path] = [("drop", 70_000)]
    rep = download(_urls(server, 2), str(tmp_path), **FAST)
    r = {f.url.rsplit("/", 1)[1]: f for f in rep.files}["f1.warc.gz"]
    assert r.status == "downloaded" and r.attempts == 2 and r.resumed
    assert server.requests_for(path) == [None, "bytes=70000-"]
    assert open(r.path, "rb").read() == server.files[path]
    assert r.bytes == len(server.files[path])  # no byte fetched twice


def test_retryable_and_permanent_http_errors(server, tmp_path):
    server.faults["/data/f0.warc.gz"] = [("status", 503), ("status", 429)]
    server.faults["/data/f2.warc.gz"] = [("status", 500)] * 10
    urls = _urls(server, 3) + [f"{server.url}/data/missing.warc.gz"]
    rep = download(urls, str(tmp_path), retries=2, **FAST)
    by = {f.url.rsplit("/", 1)[1]: f for f in rep.files}
    assert by["f0.warc.gz"].status == "downloaded" and by["f0.warc.gz"].attempts == 3
    assert by["f1.warc.gz"].status == "downloaded" and by["f1.warc.gz"].attempts == 1
    assert by["f2.warc.gz"].status == "failed" and by["f2.warc.gz"].attempts == 3
    assert "HTTP 500" in by["f2.warc.gz"].error
    miss = by["missing.warc.gz"]
    assert miss.status == "failed" and miss.attempts == 1 and "HTTP 404" in miss.error
    assert not os.path.exists(miss.path) and not os.path.exists(by["f2.warc.gz"].path)
    assert rep.counts() == {"downloaded": 2, "skipped": 0, "failed": 2}


def test_rerun_skips_finished_files_and_resumes_the_partial_one(server, tmp_path):
    path = "/data/f3.warc.gz"
    server.faults[path] = [("drop", 123_456)]
    out = str(tmp_path)
    rep1 = download(_urls(server), out, retries=0, **FAST)  # no retry: f3 stays partial
    assert rep1.counts() == {"downloaded": 3, "skipped": 0, "failed": 1}
    dest = _dest(out, server, 3)
    assert not os.path.exists(dest) and os.path.getsize(dest + ".part") == 123_456  # never counted complete
    server.log.clear()
    rep2 = download(_urls(server), out, **FAST)
    assert rep2.counts() == {"downloaded": 1, "skipped": 3, "failed": 0}
    assert server.log == [(path, "bytes=123456-")]  # finished files were not even requested
    assert open(dest, "rb").read() == server.files[path]
    assert _no_partials(out) == []


def test_changed_remote_file_restarts_instead_of_splicing(server, tmp_path):
    path = "/data/f0.warc.gz"
    server.faults[path] = [("drop", 50_000)]
    out = str(tmp_path)
    download(_urls(server, 1), out, retries=0, **FAST)
    server.files[path] = _blob(210_000, 99)  # new version on the server
    server.log.clear()
    rep = download(_urls(server, 1), out, **FAST)
    assert rep.files[0].status == "downloaded" and not rep.files[0].resumed
    assert open(rep.files[0].path, "rb").read() == server.files[path]


def test_server_that_ignores_ranges(server, tmp_path):
    path = "/data/f0.warc.gz"
    server.faults[path] = [("drop", 50_000), ("ignore_range",)]
    rep = download(_urls(server, 1), str(tmp_path), **FAST)
    assert rep.files[0].status == "downloaded" and rep.files[0].attempts == 2
    assert open(rep.files[0].path, "rb").read() == server.files[path]


def test_checksum_file(server, tmp_path):
    good = hashlib.sha256(server.files["/data/f0.warc.gz"]).hexdigest()
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(f"{good}  data/f0.warc.gz\n{'0' * 64}  data/f1.warc.gz\n")
    rep = download(_urls(server, 2), str(tmp_path / "out"), checksums=str(sums), retries=1, **FAST)
    by = {f.url.rsplit("/", 1)[1]: f for f in rep.files}
    assert by["f0.warc.gz"].status == "downloaded"
    bad = by["f1.warc.gz"]
    assert bad.status == "failed" and "sha256 checksum mismatch" in bad.error and bad.attempts == 2
    assert not os.path.exists(bad.path) and _no_partials(str(tmp_path / "out")) == []


def test_digest_header_catches_corrupt_bytes(server, tmp_path):
    server.digest = True
    server.faults["/data/f0.warc.gz"] = [("corrupt",)]
    rep = download(_urls(server, 1), str(tmp_path), **FAST)
    f = rep.files[0]
    assert f.status == "downloaded" and f.attempts == 2
    assert open(f.path, "rb").read() == server.files["/data/f0.warc.gz"]


def test_common_crawl_paths_file_and_cli(server, tmp_path):
    paths = ["crawl-data/CC-MAIN-2024-22/segments/1/warc/a.warc.gz",
             "crawl-data/CC-MAIN-2024-22/segments/1/warc/b.warc.gz"]
    for i, p in enumerate(paths):
        server.files["/" + p] = _blob(5000 + i, 7 + i)
    lst = tmp_path / "warc.paths.gz"
    with gzip.open(lst, "wt") as f:
        f.write("\n".join(paths) + "\n")
    out = tmp_path / "cc"
    from gristmill.cli import main
    rc = main(["download", str(lst), str(out), "--base-url", server.url + "/", "-j", "2", "--backoff", "0.01", "-q"])
    assert rc == 0
    for p in paths:
        assert (out / p).read_bytes() == server.files["/" + p]
    rc = main(["download", str(lst), str(out), "--base-url", server.url, "-q"])
    assert rc == 0 and json.load(open(out / "download-report.json"))["counts"]["skipped"] == 2
    server.files.pop("/" + paths[0])
    (out / paths[0]).unlink()
    assert main(["download", str(lst), str(out), "--base-url", server.url, "-q", "--retries", "0"]) == 1


def test_plan_needs_a_base_url_for_relative_paths(tmp_path):
    from gristmill.web.download import DownloadError
    with pytest.raises(DownloadError, match="--base-url"):
        plan(["crawl-data/x.warc.gz"], str(tmp_path))
    pairs = plan(["http://h.example/a/b.html?x=1", "http://h.example/dir/"], str(tmp_path))
    assert pairs[1][1].endswith(os.path.join("h.example", "dir", "index.html"))
    assert "b.html_" in pairs[0][1]


def test_recipe_download_stage_then_process(server, tmp_path):
    """A recipe's `download:` section fetches first (a rerun skips finished files), then the recipe reads
    the downloaded WARC; a failed file stops the run before any processing unless on_failure: continue."""
    import subprocess
    import sys

    import yaml
    from webutil import DATA
    server.files["/crawl/cc.warc.gz"] = (DATA / "cc-2020-34-sample.warc.gz").read_bytes()
    (tmp_path / "warc.paths").write_text("crawl/cc.warc.gz\n")
    recipe = {"dataset_path": str(tmp_path / "dl" / "crawl"), "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "work"),
              "download": {"urls": str(tmp_path / "warc.paths"), "out_dir": str(tmp_path / "dl"),
                           "base_url": server.url + "/", "backoff": 0.01, "retries": 1},
              "process": [{"html_extract_mapper": {"extractor": "resiliparse"}}]}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe))
    run = [sys.executable, "-m", "gristmill.cli", "run", str(path), "--no-progress"]
    res = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "download: 1 downloaded" in res.stderr
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 16
    res = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "0 downloaded, 1 already complete" in res.stderr
    (tmp_path / "warc.paths").write_text("crawl/cc.warc.gz\ncrawl/missing.warc.gz\n")
    (tmp_path / "out.jsonl").unlink()
    res = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and "missing.warc.gz" in res.stderr and not (tmp_path / "out.jsonl").exists()
    recipe["download"]["on_failure"] = "continue"
    path.write_text(yaml.safe_dump(recipe))
    res = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and (tmp_path / "out.jsonl").exists()


# -- issue 12: one-line errors, distinct names, file:// only on request ------------------------------------

def _cli(capsys, *args):
    """(exit code, stderr lines) of `gristmill download ARGS`."""
    from gristmill.cli import main
    rc = main(["download", *map(str, args), "--backoff", "0.01", "-q"])
    return rc, capsys.readouterr().err.strip().splitlines()


def test_missing_or_unreadable_list_is_a_one_line_error(tmp_path, capsys):
    rc, err = _cli(capsys, tmp_path / "nope.txt", tmp_path / "out")
    assert (rc, err) == (2, [f"error: list file '{tmp_path / 'nope.txt'}' not found"])
    (tmp_path / "bad.paths.gz").write_bytes(b"not gzip at all\n")
    rc, err = _cli(capsys, tmp_path / "bad.paths.gz", tmp_path / "out")
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"error: cannot read list file '{tmp_path / 'bad.paths.gz'}'")
    assert not (tmp_path / "out").exists()


def test_malformed_url_is_refused_before_anything_is_fetched(server, tmp_path, capsys):
    lst = tmp_path / "urls.txt"
    lst.write_text("\n".join(_urls(server, 2) + ["http://a..b/x", "ftp://h.example/y"]) + "\n")
    rc, err = _cli(capsys, lst, tmp_path / "out")
    assert rc == 2 and err == ["error: cannot download 'http://a..b/x': invalid host name 'a..b': fix or remove "
                               "it in the list (and 1 more bad entries)"]
    assert server.log == [] and not (tmp_path / "out").exists()


def test_url_that_is_another_urls_directory_gets_its_own_name(server, tmp_path, capsys):
    server.files["/site/a"] = b"page a"
    server.files["/site/a/b"] = b"page a/b"
    host = server.url.split("//")[1]
    for order in (["/site/a", "/site/a/b"], ["/site/a/b", "/site/a"]):
        out = tmp_path / f"out{len(order[0])}"
        lst = tmp_path / "urls.txt"
        lst.write_text("".join(f"{server.url}{p}\n" for p in order))
        rc, err = _cli(capsys, lst, out)
        assert rc == 0, err
        assert (out / host / "site" / "a" / "index.html").read_bytes() == b"page a"
        assert (out / host / "site" / "a" / "b").read_bytes() == b"page a/b"
    # a file left in the way by an earlier run fails that URL with a message, not a traceback
    old = tmp_path / "old"
    (old / host / "site").mkdir(parents=True)
    (old / host / "site" / "a").write_bytes(b"page a")
    rc, err = _cli(capsys, lst, old)
    report = json.load(open(old / "download-report.json"))
    assert rc == 1 and report["counts"] == {"downloaded": 0, "skipped": 0, "failed": 2}
    assert all("a file of that name is in the way" in f["error"] for f in report["files"])
    assert not any("Traceback" in line for line in err)


def test_file_urls_need_an_explicit_option(tmp_path, capsys):
    secret = tmp_path / "private" / "key.txt"
    secret.parent.mkdir()
    secret.write_bytes(b"local bytes")
    lst = tmp_path / "urls.txt"
    lst.write_text(secret.as_uri() + "\n")
    rc, err = _cli(capsys, lst, tmp_path / "out")
    assert rc == 2 and len(err) == 1 and "file:// URLs copy local files: allow them with --allow-file-urls" in err[0]
    assert not (tmp_path / "out").exists()
    rc, err = _cli(capsys, lst, tmp_path / "out", "--allow-file-urls")
    assert rc == 0
    assert (tmp_path / "out" / secret.relative_to("/")).read_bytes() == b"local bytes"


def test_recipe_download_section_is_checked_at_load(tmp_path):
    import yaml
    from gristmill.recipe import RecipeError, load_recipe

    def load(download):
        path = tmp_path / "r.yaml"
        path.write_text(yaml.safe_dump({"dataset_path": str(tmp_path / "dl"), "download": download}))
        return load_recipe(str(path))

    with pytest.raises(RecipeError, match=r"download: list file '.*missing.txt' not found"):
        load({"urls": str(tmp_path / "missing.txt"), "out_dir": str(tmp_path / "dl")})
    with pytest.raises(RecipeError, match=r"download: cannot download 'file:///etc/hostname': file:// URLs copy"):
        load({"urls": ["file:///etc/hostname"], "out_dir": str(tmp_path / "dl")})
    recipe, _, _ = load({"urls": ["file:///etc/hostname"], "out_dir": str(tmp_path / "dl"), "allow_file_urls": True})
    assert recipe.download.allow_file_urls is True
