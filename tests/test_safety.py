"""What gristmill refuses to do (issue 12): overwrite or re-read its inputs, leave stale export files,
share a work dir between runs, pass a run whose rows were rejected; and how it stops when interrupted."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from gm_testutil import REPO, read_jsonl, write_jsonl


def run_cli(*args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "gristmill.cli", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=timeout)


def rows(n, words=60, key="text"):
    return [{"id": f"d{i}", key: " ".join(f"w{i}x{j}" for j in range(words + (i % 7) * 10)), "n": i}
            for i in range(n)]


def recipe(tmp_path, data, export, process=(), name="recipe.yaml", **extra):
    r = {"project_name": "t", "dataset_path": str(data), "export_path": str(export) if export else None,
         "work_dir": str(tmp_path / "work"), "np": 1, "process": list(process), **extra}
    p = tmp_path / name
    p.write_text(yaml.safe_dump(r))
    return p


def one_line_error(res, *needles):
    err = res.stderr
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# -- 1. outputs that would overwrite or re-read the input -------------------------------------------

def test_export_equal_to_input_is_refused_and_input_untouched(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", rows(200))
    before = open(data, "rb").read()
    p = recipe(tmp_path, data, data, [{"words_num_filter": {"min_num": 90}}])
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 2
    one_line_error(res, "is an input file")
    assert open(data, "rb").read() == before
    assert not (tmp_path / "work").exists()


def test_export_inside_input_dir_is_refused(tmp_path):
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "a.jsonl", rows(170))
    p = recipe(tmp_path, tmp_path / "data", tmp_path / "data" / "out.jsonl")
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 2
    one_line_error(res, "inside the input directory")
    assert sorted(os.listdir(tmp_path / "data")) == ["a.jsonl"]


def test_export_dir_containing_input_and_glob_match_and_work_dir_inside_input(tmp_path):
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "a.jsonl", rows(10))
    # an HF export directory that contains the input
    res = run_cli("run", str(recipe(tmp_path, tmp_path / "data" / "a.jsonl", tmp_path / "data")), "--no-progress")
    assert res.returncode == 2
    one_line_error(res, "contains the input")
    # the export's shards would match the input glob
    res = run_cli("run", str(recipe(tmp_path, tmp_path / "data" / "*.jsonl", tmp_path / "data" / "b.jsonl")),
                  "--no-progress")
    assert res.returncode == 2
    one_line_error(res, "matches the input pattern")
    # the work dir inside the input directory
    p = recipe(tmp_path, tmp_path / "data", tmp_path / "out.jsonl", work_dir=str(tmp_path / "data" / "w"))
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 2
    one_line_error(res, "work dir", "inside the input directory")
    assert sorted(os.listdir(tmp_path / "data")) == ["a.jsonl"]


# -- 4. an export location holds exactly the current run's files ------------------------------------

def _export_files(d):
    return sorted(f for f in os.listdir(d) if f.startswith("out"))


def test_rerun_with_fewer_shards_removes_stale_shards(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", rows(300, words=100))
    out = tmp_path / "exp" / "out.jsonl"
    p = recipe(tmp_path, data, out, [{"words_num_filter": {"min_num": 10}}], export_shard_size=40_000)
    assert run_cli("run", str(p), "--no-progress").returncode == 0
    first = _export_files(tmp_path / "exp")
    assert len(first) > 3
    p = recipe(tmp_path, data, out, [{"words_num_filter": {"min_num": 150}}], export_shard_size=40_000)
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 0, res.stderr
    second = _export_files(tmp_path / "exp")
    assert 0 < len(second) < len(first)
    report = json.loads((tmp_path / "work" / "report.json").read_text())
    on_disk = sum(len(read_jsonl(tmp_path / "exp" / f)) for f in second)
    assert on_disk == report["rows_out"] == sum(1 for r in rows(300, words=100) if len(r["text"].split()) >= 150)
    assert sorted(os.path.basename(f) for f in report["exported_files"]) == second


def test_files_gristmill_did_not_write_are_refused_not_deleted(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", rows(20))
    (tmp_path / "exp").mkdir()
    foreign = tmp_path / "exp" / "out-00007-of-00009.jsonl"
    foreign.write_text('{"text": "mine"}\n')
    p = recipe(tmp_path, data, tmp_path / "exp" / "out.jsonl", export_shard_size=1000)
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 2
    one_line_error(res, "not written by gristmill", "out-00007-of-00009.jsonl")
    assert foreign.read_text() == '{"text": "mine"}\n'
    # an existing plain file at the export path is not overwritten either
    (tmp_path / "exp2").mkdir()
    (tmp_path / "exp2" / "out.jsonl").write_text("keep me\n")
    res = run_cli("run", str(recipe(tmp_path, data, tmp_path / "exp2" / "out.jsonl")), "--no-progress")
    assert res.returncode == 2 and (tmp_path / "exp2" / "out.jsonl").read_text() == "keep me\n"


def test_rerun_over_own_export_is_allowed(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", rows(50))
    p = recipe(tmp_path, data, tmp_path / "out.jsonl", [{"words_num_filter": {"min_num": 70}}])
    assert run_cli("run", str(p), "--no-progress").returncode == 0
    p = recipe(tmp_path, data, tmp_path / "out.jsonl", [{"words_num_filter": {"min_num": 80}}])
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert all(len(r["text"].split()) >= 80 for r in read_jsonl(tmp_path / "out.jsonl"))


# -- 8. honest exit status -------------------------------------------------------------------------

def test_all_rows_rejected_exits_nonzero_with_reasons(tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"text": "x", "n": i}) + "\n" for i in range(5)))
    p = recipe(tmp_path, data, tmp_path / "out.jsonl",
               [{"python_lambda_mapper": {"lambda_str": "lambda s: {**s, 'text': s['text'] + 1}"}}],
               allow_scripts=True)
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 1
    line = one_line_error(res, "every row was rejected", "5 × python_lambda_mapper TypeError")


def test_reject_ratio_budget(tmp_path):
    good = [json.dumps({"text": f"fine text {i}"}) for i in range(90)]
    bad = ["{not json"] * 10
    data = tmp_path / "in.jsonl"
    data.write_text("\n".join(good + bad) + "\n")
    p = recipe(tmp_path, data, tmp_path / "out.jsonl")
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 1
    one_line_error(res, "10 of 100 rows rejected (10.0% > max_reject_ratio 0.05)", "read")
    res = run_cli("run", str(p), "--no-progress", "--max-reject-ratio", "0.1")
    assert res.returncode == 0, res.stderr
    assert "10 rejected rows" in res.stderr
    p = recipe(tmp_path, data, tmp_path / "out.jsonl", max_reject_ratio=0.2)
    assert run_cli("run", str(p), "--no-progress").returncode == 0


def test_records_skipped_by_reader_options_are_not_errors(tmp_path):
    """WARC responses of content types the user did not ask for (PDFs, images) are listed as rejects but do
    not count toward max_reject_ratio: a real crawl is full of them."""
    sys.path.insert(0, str(REPO / "tests" / "web"))
    from webutil import http_response, warc_record, write_warc
    recs = [warc_record("response", f"http://e.com/{i}", http_response(
        f"<html><body><p>page {i}</p></body></html>".encode()), n=i) for i in range(2)]
    recs += [warc_record("response", f"http://e.com/{i}.pdf", http_response(b"%PDF-1.4", "application/pdf"), n=i)
             for i in range(2, 5)]
    data = write_warc(tmp_path / "crawl.warc.gz", recs)
    res = run_cli("run", str(recipe(tmp_path, data, tmp_path / "out.jsonl")), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "3 × read SkippedContentType" in res.stderr
    assert len(read_jsonl(tmp_path / "out.jsonl")) == 2


def test_absent_text_key_fails_fast_with_suggestion(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", rows(30, key="content"))
    p = recipe(tmp_path, data, tmp_path / "out.jsonl", text_keys="contents")
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 2
    one_line_error(res, "text_keys 'contents': no such field", "did you mean 'content'")
    assert not (tmp_path / "out.jsonl").exists()


# -- 9. one run per work dir -----------------------------------------------------------------------

def test_second_run_on_same_work_dir_refused_and_stale_lock_taken_over(tmp_path):
    from gristmill.engine.lock import WorkDirLock
    data = write_jsonl(tmp_path / "in.jsonl", rows(20))
    p = recipe(tmp_path, data, tmp_path / "out.jsonl")
    with WorkDirLock(str(tmp_path / "work")):
        res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 2
    one_line_error(res, "is in use by another run", f"pid {os.getpid()}")
    # a lock file left by a killed run (its holder is gone, so the kernel released the lock) is taken over
    (tmp_path / "work" / ".lock").write_text(json.dumps({"pid": 999999, "host": "x", "started": "then"}))
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 0, res.stderr


# -- 10. temp files, unwritable and full directories -----------------------------------------------

def test_stale_temp_files_are_removed_on_resume(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", rows(20))
    p = recipe(tmp_path, data, tmp_path / "out" / "out.jsonl")
    stale = [tmp_path / "work" / "stages" / ".gm-tmp-999999-shard-00000.part0.arrow",
             tmp_path / "out" / ".gm-tmp-999999-out.jsonl"]
    for f in stale:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"partial")
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "removed 2 temp file(s)" in res.stderr
    assert not any(f.exists() for f in stale)


def test_unwritable_export_directory_is_one_line(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", rows(5))
    (tmp_path / "afile").write_text("x")
    res = run_cli("run", str(recipe(tmp_path, data, tmp_path / "afile" / "out.jsonl")), "--no-progress")
    assert res.returncode == 2
    one_line_error(res, "export directory", "afile", "not writable")


@pytest.fixture
def tiny_fs(tmp_path):
    """A real 1 MB tmpfs (needs root and mount rights, as on CI; skipped elsewhere)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)])


def test_no_space_left_is_one_line_and_resumable(tmp_path, tiny_fs):
    data = write_jsonl(tmp_path / "in.jsonl", rows(3000, words=100))
    p = recipe(tmp_path, data, tiny_fs / "out.jsonl", work_dir=str(tmp_path / "work"))
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 1
    one_line_error(res, "No space left on device", str(tiny_fs))
    assert not [f for f in os.listdir(tiny_fs) if f.startswith(".gm-tmp-")]  # the partial export is gone
    p = recipe(tmp_path, data, tmp_path / "out.jsonl", work_dir=str(tmp_path / "work"))
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "already done" in res.stderr  # the processed shards were kept
    assert len(read_jsonl(tmp_path / "out.jsonl")) == 3000


# -- 12. --np --------------------------------------------------------------------------------------

def test_np_validated_and_capped(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", rows(10))
    p = recipe(tmp_path, data, tmp_path / "out.jsonl")
    for bad in ("0", "-3", "two"):
        res = run_cli("run", str(p), "--np", bad, "--no-progress")
        assert res.returncode == 2 and "must be a whole number" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("run", str(p), "--np", "64", "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "np=64 is far above" in res.stderr


# -- 7. interrupts ---------------------------------------------------------------------------------

SLOW = "lambda s: (__import__('time').sleep(0.01), s)[1]"


def _start(p, *extra):
    return subprocess.Popen([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress", *extra],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


PROCESS = [{"python_lambda_mapper": {"lambda_str": SLOW}}, {"words_num_filter": {"min_num": 25}},
           {"document_deduplicator": {}}]


@pytest.fixture(scope="module")
def interrupt_ref(tmp_path_factory):
    """Six one-shard files (1 s of sleeps each) and the bytes of one uninterrupted np 2 run over them: the
    same reference for every signal below (built once, not once per signal)."""
    base = tmp_path_factory.mktemp("interrupt")
    (base / "data").mkdir()
    for k in range(6):
        write_jsonl(base / "data" / f"part{k}.jsonl", rows(100, words=20 + k))
    ref = recipe(base, base / "data", base / "ref.jsonl", PROCESS, name="ref.yaml", np=2,
                 allow_scripts=True, work_dir=str(base / "refwork"))
    assert run_cli("run", str(ref)).returncode == 0
    return base / "data", (base / "ref.jsonl").read_bytes()


@pytest.mark.parametrize("sig,status,group", [(signal.SIGINT, 130, True), (signal.SIGTERM, 143, True),
                                              (signal.SIGKILL, -9, False)])
def test_interrupt_at_np2_stops_fast_and_resumes_identically(tmp_path, interrupt_ref, sig, status, group):
    """Ctrl-C / kill of the process group, and kill -9 of the main process alone (its workers must not
    outlive it): everything stops within seconds and a rerun resumes to the same bytes."""
    data, ref_bytes = interrupt_ref
    p = recipe(tmp_path, data, tmp_path / "out.jsonl", PROCESS, np=2, allow_scripts=True)
    proc = _start(p)
    deadline = time.time() + 60
    # a completed marker (shard-*.json), not the hidden temp file a worker is still writing
    while time.time() < deadline and not list((tmp_path / "work").glob("stages/*/done/shard-*.json")):
        time.sleep(0.05)
    # killed mid-run: at most 2 of the 6 shards of the first stage are done (3 s of work is left at np 2)
    assert not (tmp_path / "out.jsonl").exists()
    (os.killpg if group else os.kill)(proc.pid, sig)
    t0 = time.time()
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the run did not stop within 15 s of the signal")
    assert time.time() - t0 < 10
    assert proc.returncode == status, err
    assert "Traceback" not in err
    assert sig == signal.SIGKILL or "rerun the same command to resume" in err
    assert len(list((tmp_path / "work").glob("stages/*/done/shard-*.json"))) < 6
    # no process of the group survives half a second on (zombies left for a non-reaping init don't count);
    # looked at until they are gone, not after a fixed half-second sleep
    deadline = time.time() + 0.5
    while True:
        ps = subprocess.run(["ps", "-e", "-o", "pgid=,stat=,cmd="], capture_output=True, text=True).stdout
        alive = [ln for ln in ps.splitlines()
                 if ln.split()[0] == str(proc.pid) and not ln.split()[1].startswith("Z")]
        if not alive or time.time() > deadline:
            break
        time.sleep(0.1)
    assert not alive, alive
    res = run_cli("run", str(p), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "already done" in res.stderr
    assert (tmp_path / "out.jsonl").read_bytes() == ref_bytes
